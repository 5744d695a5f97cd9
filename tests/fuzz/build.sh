#!/usr/bin/env bash
# Builds the libFuzzer harnesses tests/fuzz/fuzz_*.c against the whole C core with
# clang -fsanitize=fuzzer,address,undefined into $OUT (default $TMPDIR/xgr2-fuzz).
# A harness binary given files instead of a directory replays them (tests/fuzz/run.sh
# replays tests/fuzz/regressions that way).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-${TMPDIR:-/tmp}/xgr2-fuzz}"
CC="${CC:-clang}"
mkdir -p "$OUT/obj"
FLAGS=(-std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -I"$ROOT/csrc/include" -pthread)
# the core once, instrumented for coverage (one compiler per core), then the harnesses
bash "$ROOT/tests/c/build_core.sh" "$OUT/obj" "$CC" "${FLAGS[@]}" -fsanitize=fuzzer-no-link > "$OUT/obj.list"
mapfile -t OBJS < "$OUT/obj.list"
source "$ROOT/tests/c/jobs.sh"
for h in "$ROOT"/tests/fuzz/fuzz_*.c; do
  jobs_start "$CC" "${FLAGS[@]}" -fsanitize=fuzzer "$h" "${OBJS[@]}" -o "$OUT/$(basename "$h" .c)" -lm
done
jobs_wait
echo "$OUT"
