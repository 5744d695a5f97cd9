#!/usr/bin/env bash
# Builds every tests/c/test_*.c driver against the whole C core with ASan+UBSan
# (-Werror) and runs it; any sanitizer report fails the run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${TMPDIR:-/tmp}/xgr2-sanitized"
mkdir -p "$OUT"
CC="${CC:-gcc}"
FLAGS=(-std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -Wall -Wextra -Werror -pedantic-errors -pthread)
mapfile -t SRCS < <(find "$ROOT/csrc" -name '*.c' | sort)
status=0
# includes between csrc/ folders flow one way (README "Layout")
python3 "$ROOT/tests/c/check_layers.py" "$ROOT/csrc" || status=1
shopt -s nullglob
for t in "$ROOT"/tests/c/test_*.c; do
  name="$(basename "$t" .c)"
  echo "[c] building $name"
  "$CC" "${FLAGS[@]}" -I"$ROOT/csrc/include" "$t" "${SRCS[@]}" -o "$OUT/$name" -lm
  echo "[c] running $name"
  if ! (cd "$ROOT" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 "$OUT/$name"); then
    echo "[c] FAILED: $name"; status=1
  fi
done
exit $status
