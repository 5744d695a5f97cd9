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
mapfile -t SRCS < <(find "$ROOT/csrc" -name '*.c' | sort)
# the core once, instrumented for coverage
OBJS=()
for s in "${SRCS[@]}"; do
  o="$OUT/obj/$(echo "${s#$ROOT/}" | tr '/' '_').o"
  "$CC" "${FLAGS[@]}" -fsanitize=fuzzer-no-link -c "$s" -o "$o"
  OBJS+=("$o")
done
for h in "$ROOT"/tests/fuzz/fuzz_*.c; do
  name="$(basename "$h" .c)"
  "$CC" "${FLAGS[@]}" -fsanitize=fuzzer "$h" "${OBJS[@]}" -o "$OUT/$name" -lm
done
echo "$OUT"
