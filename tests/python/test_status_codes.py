"""The C core's status codes reach Python unchanged: the exception table in `_core` agrees
with the enum in csrc/include/xgr2.h (tests/c/test_front.c checks that an IR builder's
status survives to the caller)."""

import re
from pathlib import Path

from xgrammar2 import _core

HEADER = Path(__file__).resolve().parents[2] / "csrc" / "include" / "xgr2.h"


def test_exception_table_matches_header_enum():
    text = HEADER.read_text()
    enum = dict(
        (name, int(value)) for name, value in re.findall(r"\b(XGR_(?:OK|ERR_[A-Z_0-9]+))\s*=\s*(\d+)", text)
    )
    assert enum["XGR_OK"] == 0
    codes = {v for k, v in enum.items() if k != "XGR_OK"}
    assert codes == set(_core._ERRORS), "every status in xgr2.h maps to an exception class"
    for name, value in enum.items():
        assert getattr(_core.lib, name) == value, name
