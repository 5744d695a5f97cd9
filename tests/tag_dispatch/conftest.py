"""pytest setup for tests/tag_dispatch: import xgrammar2 from the source tree when it is not
installed (the tests then need the compiled core and skip without it)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
try:
    import xgrammar2  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "engine"))
