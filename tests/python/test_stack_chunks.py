"""stack_chunks.py: on CPython 3.11/3.12, a loop whose callee's frame lands just past a frame
chunk's end maps and unmaps a chunk per call (CPython gh-142183); with xgrammar2 imported, the
arena allocator in front of the interpreter's serves those chunks from the blocks it kept, and
``XGRAMMAR2_STACK_CHUNK_CACHE=0`` leaves the interpreter's allocator alone. Each case runs in a
fresh interpreter, where no other test has moved the chunk boundary or installed anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from xgrammar2 import stack_chunks

pytestmark = pytest.mark.skipif(not stack_chunks.applies(),
                                reason="the chunk boundary cost is CPython 3.11/3.12's")

# Recurses to each depth in turn and, at the bottom, calls a small function 2,000 times: at
# the depth where that call starts a new chunk, every call needs one. Prints, per depth, how
# many chunk requests the kept blocks served, then the language check of the work done.
_PROBE = r"""
import json, sys
import xgrammar2
from xgrammar2 import stack_chunks

def leaf(i):
    a = [i, i + 1, i + 2]
    return a[1]

def down(d, n):
    if d:
        return down(d - 1, n)
    s = 0
    for i in range(n):
        s += leaf(i)
    return s

served = []
total = 0
for d in range(0, 300):
    before = stack_chunks.counts()[0]
    total += down(d, 2000)
    served.append(stack_chunks.counts()[0] - before)
print(json.dumps({"installed": stack_chunks._installed, "served": served, "total": total}))
"""


def _probe(env_extra: dict) -> dict:
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_calls_at_a_chunk_boundary_take_kept_blocks_instead_of_mapping_chunks():
    r = _probe({})
    assert r["installed"] is True
    # (the work itself is unchanged: sum of i + 1 over 2,000 calls, 300 times)
    assert r["total"] == 300 * sum(i + 1 for i in range(2000))
    # some depth puts the leaf's frame in a new chunk: each of its 2,000 calls is served
    assert max(r["served"]) >= 2000, r["served"]
    # elsewhere the allocator is not asked at all
    assert sorted(r["served"])[len(r["served"]) // 2] < 10


def test_switched_off_it_leaves_the_interpreters_allocator_alone():
    r = _probe({"XGRAMMAR2_STACK_CHUNK_CACHE": "0"})
    assert r["installed"] is False
    assert max(r["served"]) == 0
