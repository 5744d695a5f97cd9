#!/usr/bin/env bash
# Builds the concurrency driver tests/c/test_threads.c against the whole C core with
# ThreadSanitizer and runs it: 16 threads compile, fill, accept, fork, roll back and
# batch-fill on shared compiled grammars; any data race report or digest mismatch with
# the serial run fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${TMPDIR:-/tmp}/xgr2-tsan"
mkdir -p "$OUT"
CC="${CC:-gcc}"
FLAGS=(-std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=thread -Wall -Wextra -Werror -pthread
       -I"$ROOT/csrc/include")
echo "[tsan] building test_threads"
bash "$ROOT/tests/c/build_core.sh" "$OUT/obj" "$CC" "${FLAGS[@]}" > "$OUT/obj.list"
mapfile -t OBJS < "$OUT/obj.list"
"$CC" "${FLAGS[@]}" "$ROOT/tests/c/test_threads.c" "${OBJS[@]}" -o "$OUT/test_threads" -lm
echo "[tsan] running test_threads"
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:exitcode=66" "$OUT/test_threads"
