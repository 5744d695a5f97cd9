#!/usr/bin/env bash
# Runs the vLLM adapter tests inside the cached vLLM venv (created on first use by
# e2e/setup_vllm_env.sh, with xgrammar2 and the adapter installed editable from this checkout).
#
#   bash e2e/run_vllm_tests.sh               # tests/vllm: manager/backends harness, no server (~1-2 min)
#   bash e2e/run_vllm_tests.sh --e2e         # also e2e/: real vLLM servers (tiny model, SmolLM2)
#   bash e2e/run_vllm_tests.sh -k rollback   # extra args go to pytest
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
VENV="${XGR2_VLLM_VENV:-$CACHE/vllm-venv}"
bash "$ROOT/e2e/setup_vllm_env.sh"

targets=("tests/vllm")
args=()
for a in "$@"; do
  if [ "$a" = "--e2e" ]; then targets+=("e2e"); else args+=("$a"); fi
done

export HF_HUB_OFFLINE=1
export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-$CACHE/vllm-cache}"
cd "$ROOT"
# -p no:cacheprovider: nothing written into the checkout; rootdir conftest of tests/python is
# not involved because only the given directories are collected.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -o testpaths= "${targets[@]}" "${args[@]+"${args[@]}"}"
