#!/usr/bin/env bash
# Compiles every csrc/**/*.c once into OBJDIR, up to one compiler per core at a time (jobs.sh), and
# prints the object files (one path per line) for the caller to link its drivers against:
#   bash tests/c/build_core.sh OBJDIR CC FLAG... > OBJDIR.list && mapfile -t OBJS < OBJDIR.list
# (a plain command, not a process substitution, so that `set -e` sees a failed build)
# The sanitizer, TSan and fuzz scripts link many drivers against the same core; compiling the
# core once instead of once per driver is most of their build time. A failed compile prints the
# compiler's message and exits 1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/c/jobs.sh
source "$ROOT/tests/c/jobs.sh"
[ $# -ge 2 ] || { echo "usage: build_core.sh OBJDIR CC [FLAG...]" >&2; exit 2; }
OBJDIR="$1"
CC="$2"
shift 2
mkdir -p "$OBJDIR"
mapfile -t SRCS < <(find "$ROOT/csrc" -name '*.c' | sort)
objs=()
for s in "${SRCS[@]}"; do
  o="$OBJDIR/$(echo "${s#"$ROOT"/}" | tr '/' '_').o"
  objs+=("$o")
  jobs_start "$CC" "$@" -c "$s" -o "$o"
done
jobs_wait || { echo "build_core: compiling the C core with $CC failed (messages above)" >&2; exit 1; }
printf '%s\n' "${objs[@]}"
