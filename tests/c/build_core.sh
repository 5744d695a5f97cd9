#!/usr/bin/env bash
# Compiles every csrc/**/*.c once into OBJDIR, up to one compiler per core at a time, and prints
# the object files (one path per line) for the caller to link its drivers against:
#   bash tests/c/build_core.sh OBJDIR CC FLAG... > OBJDIR.list && mapfile -t OBJS < OBJDIR.list
# (a plain command, not a process substitution, so that `set -e` sees a failed build)
# The sanitizer, TSan and fuzz scripts link many drivers against the same core; compiling the
# core once instead of once per driver is most of their build time. A failed compile prints the
# compiler's message and exits 1. XGR2_BUILD_JOBS overrides the number of parallel compilers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -ge 2 ] || { echo "usage: build_core.sh OBJDIR CC [FLAG...]" >&2; exit 2; }
OBJDIR="$1"
CC="$2"
shift 2
mkdir -p "$OBJDIR"
JOBS="${XGR2_BUILD_JOBS:-$(nproc)}"
mapfile -t SRCS < <(find "$ROOT/csrc" -name '*.c' | sort)
objs=()
pids=()
failed=0
for s in "${SRCS[@]}"; do
  o="$OBJDIR/$(echo "${s#"$ROOT"/}" | tr '/' '_').o"
  objs+=("$o")
  "$CC" "$@" -c "$s" -o "$o" &
  pids+=("$!")
  # at most JOBS compilers: wait for the oldest before starting another
  if [ "${#pids[@]}" -ge "$JOBS" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do
  wait "$p" || failed=1
done
if [ "$failed" != 0 ]; then
  echo "build_core: compiling the C core with $CC failed (messages above)" >&2
  exit 1
fi
printf '%s\n' "${objs[@]}"
