"""Checks that csrc/ includes flow one way between folders:
common <- ir <- front <- lower <- parse <- mask <- compile, runtime.
A file may include its own folder, csrc/include and folders to its left; anything else fails.
Run by tests/c/run_sanitized.sh and by tests/python/test_layers.py."""

import os
import re
import sys

ORDER = ["include", "common", "ir", "front", "lower", "parse", "mask", ("compile", "runtime")]
RANK = {}
for i, names in enumerate(ORDER):
    for n in names if isinstance(names, tuple) else (names,):
        RANK[n] = i


def violations(csrc: str):
    out = []
    for dirpath, _, files in os.walk(csrc):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            here = os.path.relpath(path, csrc).split(os.sep)[0]
            if here not in RANK:
                out.append(f"{path}: folder '{here}' has no place in the layer order")
                continue
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    target = os.path.normpath(os.path.join(dirpath, m.group(1)))
                    there = os.path.relpath(target, csrc).split(os.sep)[0]
                    if there == here or there == "include":
                        continue
                    if there not in RANK or RANK[there] >= RANK[here]:
                        out.append(f"{path}:{lineno}: '{here}' includes '{m.group(1)}' ('{there}' is not to its left)")
    return out


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "csrc")
    bad = violations(root)
    for b in bad:
        print(b)
    print(f"[layers] {'FAILED' if bad else 'ok'}: {len(bad)} include(s) against the layer order")
    sys.exit(1 if bad else 0)
