#!/usr/bin/env bash
# Runs the SGLang adapter tests inside the cached SGLang venv (created on first use by
# e2e/setup_sglang_env.sh, with xgrammar2 + xgrammar2_sglang installed editable from this
# checkout).
#
#   bash e2e/run_sglang_tests.sh              # tests/sglang: SGLang's own classes on the CPU, no server
#   bash e2e/run_sglang_tests.sh --server     # also e2e/test_sglang_server.py (real server; skipped without a CUDA GPU)
#   bash e2e/run_sglang_tests.sh -k parity    # extra args go to pytest
#   bash e2e/run_sglang_tests.sh tests/sglang/test_tools.py   # explicit paths replace the defaults
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
VENV="${XGR2_SGLANG_VENV:-$CACHE/sglang-venv}"
bash "$ROOT/e2e/setup_sglang_env.sh"

targets=()
args=()
server=0
for a in "$@"; do
  if [ "$a" = "--server" ]; then server=1
  elif [ -e "$ROOT/${a%%::*}" ]; then targets+=("$a")   # an explicit test path
  else args+=("$a"); fi
done
if [ ${#targets[@]} -eq 0 ]; then
  targets=("tests/sglang")
  if [ "$server" = 1 ]; then targets+=("e2e/test_sglang_server.py"); fi
fi

# The CPU tests need no hub access; the server test may download its model.
if [ "$server" = 0 ]; then export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"; fi
# SGLang only loads whitelisted plugins when SGLANG_PLUGINS is set: keep ours in.
if [ -n "${SGLANG_PLUGINS:-}" ] && [[ ",$SGLANG_PLUGINS," != *",xgrammar2,"* ]]; then
  export SGLANG_PLUGINS="$SGLANG_PLUGINS,xgrammar2"
fi
cd "$ROOT"
# pytest-xdist workers, up to 4 (one per core; XGR2_TEST_WORKERS=0 runs one process), a whole
# file per worker (--dist loadfile): test_parity's summary reads what its file's tests recorded.
mapfile -t xdist < <(bash "$ROOT/tests/xdist_args.sh" "$VENV/bin/python" --dist loadfile)
# -p no:cacheprovider: nothing written into the checkout. -W: SGLang's CUDA-only modules warn
# on import on a CPU machine.
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -o testpaths= \
  -W "ignore::DeprecationWarning" -W "ignore::UserWarning" -rs "${xdist[@]}" \
  "${targets[@]}" "${args[@]+"${args[@]}"}"
