"""Writes the seed corpus of the image fuzz target (tests/fuzz/fuzz_image.c): images
(xgr_compiled_image) of grammars from the EBNF corpus and a few hand-written ones (a token
terminal, a compressed repetition, a TagDispatch), each behind a short op stream.

    PYTHONPATH=engine python tests/fuzz/make_image_seeds.py tests/fuzz/corpus/image

Needs the built core (python setup.py build_ext --inplace). Inputs over 4 KiB are skipped.
"""
import os, glob, hashlib, sys
import xgrammar2 as xgr
from xgrammar2 import _core
ffi, lib = _core.ffi, _core.lib
out = sys.argv[1]
# the fuzz vocabulary's size (tests/fuzz/fuzz_common.h): token ids of Token(k) must be below it
vocab = [chr(97 + i % 26) * (1 + i // 26) for i in range(76)]
info = xgr.TokenizerInfo(vocab)
comp = xgr.GrammarCompiler(info, cache_dir=False, cache_enabled=False)
sources = []
HERE = os.path.dirname(os.path.abspath(__file__))
for p in sorted(glob.glob(os.path.join(HERE, "corpus", "ebnf", "*"))):
    d = open(p, "rb").read()
    cut = d.find(b"\xff\x00")
    sources.append(d[:cut if cut >= 0 else len(d)].decode("utf-8", "replace"))
extra = ['root ::= "a" Token(3) "b"*', 'root ::= x{2,30}\nx ::= "ab" | "c"',
         'root ::= TagDispatch(("<f=", f), loop_after_dispatch=true)\nf ::= [a-z]+ ">"']
n = 0
for src in extra + sources:
    try:
        g = xgr.Grammar.from_ebnf(src)
        cg = comp.compile_grammar(g)
    except Exception:
        continue
    buf = ffi.new("uint8_t **"); ln = ffi.new("size_t *")
    if lib.xgr_compiled_image(cg._ptr, buf, ln) != 0 or buf[0] == ffi.NULL:
        continue
    img = bytes(ffi.buffer(buf[0], ln[0])); lib.xgr_free(buf[0])
    ops = bytes([6, 0, 3, 6, 1, 5, 6, 10, 3, ord("a"), ord("b"), ord("c"), 6, 7, 2, 6, 11, 4, 6])
    data = bytes([len(ops)]) + ops + img
    if len(data) > 4096:
        continue
    with open(os.path.join(out, hashlib.sha256(data).hexdigest()[:16]), "wb") as f:
        f.write(data)
    n += 1
print(n, "seeds")
