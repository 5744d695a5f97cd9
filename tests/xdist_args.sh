#!/usr/bin/env bash
# Prints pytest's pytest-xdist arguments, one per line, for the test runners (.ci/test, the
# upstream suite, the SGLang tests): `-n N` and the extra ARGs (e.g. `--dist loadfile`) for up to
# 4 workers, one per core (XGR2_TEST_WORKERS overrides); `-p no:xdist` for one worker or when
# PYTHON cannot import xdist.
#   mapfile -t XDIST < <(bash tests/xdist_args.sh PYTHON [ARG...])
set -euo pipefail
PY="$1"
shift
n="$(nproc)"
workers="${XGR2_TEST_WORKERS:-$(( n > 4 ? 4 : n ))}"
if [ "$workers" -gt 1 ] && "$PY" -c "import xdist" >/dev/null 2>&1; then
  printf '%s\n' -n "$workers" "$@"
else
  echo "-p"
  echo "no:xdist"
fi
