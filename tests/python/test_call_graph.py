"""tests/c/call_graph.py: the fill path climbs no folder and csrc/ has no cross-folder circle
(by calls or includes); the tool itself finds a circle, a climb, and ignores comments/strings."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("call_graph", ROOT / "tests" / "c" / "call_graph.py")
call_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(call_graph)


def _graph():
    return call_graph.Graph(str(ROOT / "csrc"))


def test_fill_path_has_no_climbs():
    g = _graph()
    _, stops, files, climbs = call_graph.fill_path(g, "xgr_matcher_fill_bitmask")
    assert len(stops) > 50 and "runtime/matcher.c" in files and "mask/mask_cache.c" in files
    assert climbs == []


def test_no_cross_folder_circles():
    g = _graph()
    assert call_graph.call_cycles(g) == []
    assert call_graph.include_cycles(g) == []
    assert call_graph.folder_cycles(call_graph.file_call_edges(g)) == []
    assert call_graph.folder_cycles(g.includes) == []
    assert call_graph.main(["--file-cycles", "--csrc", str(ROOT / "csrc")]) == 0


def _write(base: Path, rel: str, text: str) -> None:
    p = base / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_a_circle_and_a_climb_are_reported(tmp_path):
    _write(tmp_path, "mask/m.c", '/* c_fn( in a comment */\nint m_fn(int x) {\n  return c_fn(x) + 1;\n}\n'
           'int m_leaf(void) { const char *s = "c_other("; return s[0]; }\n')
    _write(tmp_path, "compile/c.c", "#include \"../mask/m.h\"\n#define CALL(x) c_other(x)\n"
           "int c_fn(int x) {\n  if (x) return m_leaf();\n  return 0;\n}\n"
           "static int c_other(int (*cb)(int), int y) { return cb(y); }\n")
    _write(tmp_path, "mask/m.h", "int m_fn(int x);\n")
    g = call_graph.Graph(str(tmp_path))
    assert g.calls[("mask/m.c", "m_fn")] == [("compile/c.c", "c_fn")]
    assert g.calls[("mask/m.c", "m_leaf")] == []  # the string and the comment are not calls
    _, stops, files, climbs = call_graph.fill_path(g, "m_fn")
    assert {n for _, n in stops} == {"m_fn", "c_fn", "m_leaf"}
    assert climbs == [(("mask/m.c", "m_fn"), ("compile/c.c", "c_fn"))]
    assert call_graph.call_cycles(g) == [["compile/c.c", "mask/m.c"]]
    assert call_graph.main(["--file-cycles", "--csrc", str(tmp_path)]) == 1
