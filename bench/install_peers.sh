#!/usr/bin/env bash
# Create (or reuse) the benchmark virtualenv with the pinned peer engines.
#
#   bash bench/install_peers.sh            # venv at $BENCH_VENV or <repo>/.cache/bench-venv
#   BENCH_VENV=/work/devenv bash bench/install_peers.sh   # top up an existing venv instead
#
# Prints the venv's python on its last line, so `PY=$(bash bench/install_peers.sh | tail -1)` works.
# The venv is cached: a stamp file records the pins it was built with and a rerun with the same pins is a
# no-op. xgrammar2 itself is installed from this checkout when it has packaging metadata; a failing
# xgrammar2 build does not fail the script, because the peers are useful to measure on their own.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-$REPO_ROOT/.cache/bench-venv}"
PYTHON_BIN="${PYTHON:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3

# Pins: the versions DESIGN.md section 2 quotes peer numbers for. torch==2.13.0 resolves to the local
# CPU wheel on the project machines; xgrammar imports it.
PINS=(
  "xgrammar==0.2.8"
  "llguidance==1.9.1"
  "torch==2.13.0"
  "transformers"
  "tokenizers"
  "numpy"
  "matplotlib"
  "jsonschema"
  "pytest"
  "cffi"
)
OPTIONAL_PINS=("outlines-core==0.2.14")
STAMP_TEXT="v2 ${PINS[*]} ${OPTIONAL_PINS[*]}"

log() { echo "[install_peers] $*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv at $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON_BIN" -m venv "$VENV"
fi
PY="$VENV/bin/python"
STAMP="$VENV/.xgr2-bench-stamp"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ]; then
  log "peers already installed in $VENV"
else
  log "installing pinned peers into $VENV"
  "$PY" -m pip install --disable-pip-version-check -q "${PINS[@]}" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  # Verify instead of trusting pip's exit status through the filter above.
  "$PY" - <<'EOF'
import importlib.metadata as md
want = {"xgrammar": "0.2.8", "llguidance": "1.9.1"}
for name, ver in want.items():
    got = md.version(name)
    if got != ver:
        raise SystemExit(f"{name}: want {ver}, got {got}")
import matplotlib, numpy, tokenizers, transformers, torch  # noqa: F401
EOF
  for p in "${OPTIONAL_PINS[@]}"; do
    if ! "$PY" -m pip install --disable-pip-version-check -q "$p" 2>&1 | grep -v "^WARNING: Location" >&2; then :; fi
    "$PY" -c "import outlines_core" 2>/dev/null || log "optional peer $p not installed (skipped)"
  done
  echo "$STAMP_TEXT" > "$STAMP"
fi

# xgrammar2 from this checkout, when the python package can be built. Skipped when it already imports
# (e.g. the lead installed it into the venv) unless XGR2_REINSTALL=1.
if [ "${XGR2_REINSTALL:-0}" = "1" ] || ! "$PY" -c "import xgrammar2" >/dev/null 2>&1; then
  if [ -f "$REPO_ROOT/pyproject.toml" ] || [ -f "$REPO_ROOT/setup.py" ]; then
    log "installing xgrammar2 from $REPO_ROOT"
    if ! "$PY" -m pip install --disable-pip-version-check -q -e "$REPO_ROOT" > "$VENV/xgrammar2-install.log" 2>&1; then
      log "xgrammar2 did not build (see $VENV/xgrammar2-install.log); the benchmark will run the peers only"
    fi
  else
    log "no pyproject.toml/setup.py yet: xgrammar2 not installed; the benchmark will run the peers only"
  fi
fi

echo "$PY"
