"""A grammar the preload put into the compile cache is left as a steady hit finds it
(docs/disk-cache.md, "Preload"): the constants every GrammarMatcher of it reads are already on
it, and its first hit names no file again (the preload named it); its masks are those of a
process without a directory, and the first hit is still counted and still touches its files."""

import os

import xgrammar2 as xgr
from xgrammar2 import disk_cache as dcm
from xgrammar2 import matcher as mm

from test_disk_cache import REQUESTS, compile_one, files, info, reference, walk  # noqa: F401  (fixtures)
from test_disk_cache_preload import _default_env, fill, preloaded, warm  # noqa: F401

ADOPTED = REQUESTS[:5]


def _adopted(comp):
    """The compile cache's entries the preload put there that no request has hit yet."""
    return [e[0] for e in comp._cache._entries.values() if e[4] is not None]


def test_preloaded_grammars_carry_their_matcher_constants(info, warm):
    d, _, _ = warm
    comp, dc = preloaded(info, d)
    grammars = _adopted(comp)
    assert len(grammars) == len(dc.preload.adopted) == len(ADOPTED)
    want = (info.vocab_size, (info.vocab_size + 31) // 32, tuple(info.stop_token_ids))
    assert [g._matcher_consts for g in grammars] == [want] * len(grammars)


def test_a_first_hit_reads_no_constant_and_names_no_file_again(info, reference, warm, monkeypatch):
    d, _, expect = warm
    comp, dc = preloaded(info, d)
    assert len(_adopted(comp)) == len(ADOPTED)

    def refuse(*a, **k):
        raise AssertionError("first-time work on a preloaded grammar's first hit")

    # (the request's side only: the preload is over)
    monkeypatch.setattr(mm, "_grammar_consts", refuse)
    monkeypatch.setattr(dcm.DiskCache, "file_for", refuse)
    touched = []
    monkeypatch.setattr(dcm.DiskCache, "_touch_if_old",
                        lambda self, path, digest, mtime: touched.append((path, digest)))
    grammars = [compile_one(comp, k, a) for k, a in ADOPTED]
    masks = [walk(info, g) for g in grammars]
    monkeypatch.undo()
    assert masks == reference[:len(ADOPTED)]
    assert not _adopted(comp)
    # every first hit counted once, and its own file handed to the LRU touch
    assert dc.preload.hits == len(ADOPTED) and dc.misses == 0
    assert len({dg for _, dg in touched}) == len(touched) == len(ADOPTED)
    assert all(p == dc.file_for(dg) and os.path.exists(p) for p, dg in touched)
    # the same masks as a process without a directory, and from a cold compile
    cold = xgr.GrammarCompiler(info, cache_dir=False)
    assert [walk(info, compile_one(cold, k, a)) for k, a in ADOPTED] == masks
