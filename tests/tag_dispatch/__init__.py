"""TagDispatch tests (a package so the module name does not clash with
tests/structural_tag/test_tag_dispatch.py)."""
