import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from js_engine import ENGINE  # noqa: E402


def pytest_report_header(config):
    line = f"json_schema tests: matching engine = {ENGINE.name}"
    if ENGINE.fallback_reason:
        line += f" (xgrammar2 unavailable: {ENGINE.fallback_reason})"
    return line


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"json_schema tests ran on engine: {ENGINE.name}")
