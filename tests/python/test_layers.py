"""csrc/ includes flow one way between folders (tests/c/check_layers.py), and the check
catches an include that goes the wrong way."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_layers", ROOT / "tests" / "c" / "check_layers.py")
check_layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layers)


def test_csrc_includes_follow_the_layer_order():
    assert check_layers.violations(str(ROOT / "csrc")) == []


def test_an_upward_include_is_reported(tmp_path):
    (tmp_path / "ir").mkdir()
    (tmp_path / "mask").mkdir()
    (tmp_path / "mask" / "m.h").write_text("int m;\n")
    (tmp_path / "ir" / "ir.c").write_text('#include "../mask/m.h"\n#include "ir.h"\n')
    bad = check_layers.violations(str(tmp_path))
    assert len(bad) == 1 and "ir.c:1" in bad[0] and "mask" in bad[0]


def test_an_unknown_folder_is_reported(tmp_path):
    (tmp_path / "misc").mkdir()
    (tmp_path / "misc" / "x.c").write_text("int x;\n")
    assert any("no place in the layer order" in b for b in check_layers.violations(str(tmp_path)))
