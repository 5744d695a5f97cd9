#!/usr/bin/env bash
# Runs the vLLM adapter tests inside the cached vLLM venv (created on first use by
# e2e/setup_vllm_env.sh, with xgrammar2 and the adapter installed editable from this checkout).
#
#   bash e2e/run_vllm_tests.sh               # tests/vllm: manager/backends harness, no server (~1-2 min)
#   bash e2e/run_vllm_tests.sh --e2e         # also e2e/: real vLLM servers (tiny model, SmolLM2)
#   bash e2e/run_vllm_tests.sh -k rollback   # extra args go to pytest
#   bash e2e/run_vllm_tests.sh e2e/test_tiny_server.py   # explicit paths replace the defaults
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
VENV="${XGR2_VLLM_VENV:-$CACHE/vllm-venv}"
bash "$ROOT/e2e/setup_vllm_env.sh"

targets=()
args=()
e2e=0
for a in "$@"; do
  if [ "$a" = "--e2e" ]; then e2e=1
  elif [ -e "$ROOT/${a%%::*}" ]; then targets+=("$a")   # an explicit test path
  else args+=("$a"); fi
done
if [ ${#targets[@]} -eq 0 ]; then
  targets=("tests/vllm")
  if [ "$e2e" = 1 ]; then targets+=("e2e"); fi
fi

export HF_HUB_OFFLINE=1
export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-$CACHE/vllm-cache}"
cd "$ROOT"
# -p no:cacheprovider: nothing written into the checkout; rootdir conftest of tests/python is
# not involved because only the given directories are collected.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -o testpaths= \
  -o asyncio_default_fixture_loop_scope=function "${targets[@]}" "${args[@]+"${args[@]}"}"
