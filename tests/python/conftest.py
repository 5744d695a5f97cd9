"""pytest setup for tests/python: lets the pure-Python tests run from a source checkout where
xgrammar2 is not installed (the C-core tests then skip)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
try:
    import xgrammar2  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "engine"))
