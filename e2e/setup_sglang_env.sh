#!/usr/bin/env bash
# Creates (once) the cached SGLang virtualenv and installs xgrammar2 (with its SGLang adapter,
# plugins/sglang/xgrammar2_sglang, shipped in the main distribution) into it, editable from
# this checkout. Idempotent: with the cache in place it only re-installs xgrammar2 when the
# checkout's compiled core is stale (a few seconds).
#
#   bash e2e/setup_sglang_env.sh            # venv at $XGR2_SGLANG_VENV (default ~/.cache/xgrammar2/sglang-venv)
#   XGR2_SGLANG_VENV=/path bash e2e/setup_sglang_env.sh
#
# sglang 0.5.23 pulls the full CUDA wheel stack (torch + triton + CUDA 13 libraries, ~11 GB,
# ~5 minutes the first time). It imports and its grammar classes run on a CPU-only machine;
# serving needs a GPU (see ../shared/docs/sglang-integration.md §4).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
VENV="${XGR2_SGLANG_VENV:-$CACHE/sglang-venv}"
PY="${PYTHON:-python3}"
SGLANG_SPEC="${XGR2_SGLANG_SPEC:-sglang==0.5.23}"
# Everything that decides the venv's contents; a change rebuilds it.
PINS="$SGLANG_SPEC pytest pytest-timeout jsonschema openai setuptools wheel cffi"
KEY="$(printf '%s' "$PINS" | sha256sum | cut -c1-12)"
MARK="$VENV/.complete-$KEY"

log() { echo "[setup_sglang_env] $*" >&2; }

if [ ! -f "$MARK" ]; then
  log "creating $VENV ($SGLANG_SPEC; takes ~5 minutes and ~11 GB)"
  if [ -d "$VENV" ]; then rm -rf "$VENV"; fi
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
  # -qq: errors only (the machine's pip config warns about every missing extra index dir).
  "$VENV/bin/pip" install -qq $PINS
  # Import the grammar subsystem now: a broken torch / triton combination fails here.
  "$VENV/bin/python" - <<'PYEOF'
import importlib.metadata as md
import sglang.srt.constrained.base_grammar_backend  # noqa: F401
print(f"[setup_sglang_env] sglang {md.version('sglang')}, torch {md.version('torch')}, "
      f"xgrammar {md.version('xgrammar')}")
PYEOF
  touch "$MARK"
fi
# pytest-xdist (run_sglang_tests.sh splits the test files over the cores): added to a venv
# built before it was used, without rebuilding the venv.
"$VENV/bin/python" -c "import xdist" >/dev/null 2>&1 || "$VENV/bin/pip" install -qq "pytest-xdist==3.8.0" \
  || log "pytest-xdist could not be installed: the tests run in one process"

# xgrammar2 (cffi build, in place; it ships xgrammar2_sglang and its entry point), editable.
# Skipped when both packages already resolve to this checkout, the entry point is declared and
# the compiled core is newer than its sources (XGR2_FORCE_INSTALL=1 re-installs anyway).
up_to_date() {
  "$VENV/bin/python" - "$ROOT" >/dev/null 2>&1 <<'PYEOF'
import glob, os, sys
from importlib.metadata import entry_points
root = os.path.realpath(sys.argv[1])
import xgrammar2, xgrammar2_sglang
for mod in (xgrammar2, xgrammar2_sglang):
    assert os.path.realpath(mod.__file__).startswith(root + os.sep)
assert any(e.name == "xgrammar2" for e in entry_points(group="sglang.srt.plugins"))
so = glob.glob(os.path.join(root, "engine", "xgrammar2", "_xgr2_cffi*.so"))
assert so
built = min(os.path.getmtime(p) for p in so)
srcs = glob.glob(os.path.join(root, "csrc", "**", "*.[ch]"), recursive=True)
srcs += [os.path.join(root, "engine", "xgrammar2", "_build_ffi.py"), os.path.join(root, "setup.py"),
         os.path.join(root, "pyproject.toml")]
assert all(os.path.getmtime(p) <= built + 1 for p in srcs if os.path.exists(p))
PYEOF
}
if [ "${XGR2_FORCE_INSTALL:-0}" = "1" ] || ! up_to_date; then
  log "installing xgrammar2 + xgrammar2_sglang (editable) from $ROOT"
  "$VENV/bin/pip" install -qq --no-build-isolation --no-deps -e "$ROOT"
fi
"$VENV/bin/python" - <<EOF
import os, xgrammar2, xgrammar2_sglang
assert os.path.realpath(xgrammar2.__file__).startswith(os.path.realpath("$ROOT")), xgrammar2.__file__
from importlib.metadata import entry_points
assert any(e.name == "xgrammar2" for e in entry_points(group="sglang.srt.plugins")), "entry point missing"
EOF
log "ready: $VENV"
