"""pytest hooks for the structural-tag tests; helpers live in st_support.py."""

import pytest

from st_support import ENGINE, ENGINE_WHY, JSON_BACKEND_WHY


def pytest_report_header(config):
    return [f"structural-tag engine: {ENGINE_WHY}", f"structural-tag JSON schemas: {JSON_BACKEND_WHY}"]


@pytest.fixture(scope="session")
def engine():
    if ENGINE is None:
        pytest.skip(ENGINE_WHY)
    return ENGINE
