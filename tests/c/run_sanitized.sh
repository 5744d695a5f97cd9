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
status=0
# includes between csrc/ folders flow one way (README "Layout")
python3 "$ROOT/tests/c/check_layers.py" "$ROOT/csrc" || status=1
# the core once (one compiler per core), then every driver against its objects, in parallel too
echo "[c] building the C core"
bash "$ROOT/tests/c/build_core.sh" "$OUT/obj" "$CC" "${FLAGS[@]}" -I"$ROOT/csrc/include" > "$OUT/obj.list"
mapfile -t OBJS < "$OUT/obj.list"
shopt -s nullglob
DRIVERS=("$ROOT"/tests/c/test_*.c)
echo "[c] building ${#DRIVERS[@]} drivers"
source "$ROOT/tests/c/jobs.sh"
for t in "${DRIVERS[@]}"; do
  name="$(basename "$t" .c)"
  rm -f "$OUT/$name"
  jobs_start "$CC" "${FLAGS[@]}" -I"$ROOT/csrc/include" "$t" "${OBJS[@]}" -o "$OUT/$name" -lm
done
jobs_wait || status=1
for t in "${DRIVERS[@]}"; do
  name="$(basename "$t" .c)"
  if [ ! -x "$OUT/$name" ]; then
    echo "[c] FAILED: $name did not build"; status=1; continue
  fi
  echo "[c] running $name"
  if ! (cd "$ROOT" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 "$OUT/$name"); then
    echo "[c] FAILED: $name"; status=1
  fi
done
exit $status
