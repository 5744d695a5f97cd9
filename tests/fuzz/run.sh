#!/usr/bin/env bash
# Builds the fuzz harnesses (tests/fuzz/build.sh), replays every input under
# tests/fuzz/regressions/<target>/ (each one a crash found and fixed), then fuzzes each
# target for SECONDS seconds (default 25) from tests/fuzz/corpus/<target> (copied to a
# scratch dir, so the committed corpus is not modified). Any crash, sanitizer report,
# leak, per-input timeout (30 s) or cached/brute-force mask mismatch fails the run; the
# reproducer is left in $WORK/artifacts.
#   bash tests/fuzz/run.sh [SECONDS] [TARGET...]
# KEEP_GOING=1 restarts a target after a crash until its time is used (long runs); the
# libFuzzer logs are in $WORK/logs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_PER="${1:-25}"
shift || true
WORK="${WORK:-${TMPDIR:-/tmp}/xgr2-fuzz-run}"
export OUT="${OUT:-${TMPDIR:-/tmp}/xgr2-fuzz}"
if ! command -v clang >/dev/null 2>&1; then
  echo "[fuzz] installing clang"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev) >/dev/null 2>&1 \
    || { echo "[fuzz] could not install clang"; exit 1; }
fi
echo "[fuzz] building harnesses into $OUT"
bash "$ROOT/tests/fuzz/build.sh" >/dev/null
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  for h in "$ROOT"/tests/fuzz/fuzz_*.c; do TARGETS+=("$(basename "$h" .c | sed 's/^fuzz_//')"); done
fi
mkdir -p "$WORK/logs" "$WORK/artifacts"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for t in "${TARGETS[@]}"; do
  bin="$OUT/fuzz_$t"
  reg=("$ROOT"/tests/fuzz/regressions/"$t"/*)
  if [ -e "${reg[0]}" ]; then
    echo "[fuzz] $t: replaying ${#reg[@]} regression inputs"
    if ! "$bin" -runs=1 "${reg[@]}" > "$WORK/logs/$t.replay.log" 2>&1; then
      tail -30 "$WORK/logs/$t.replay.log"; echo "[fuzz] FAILED: $t regression replay"; status=1; continue
    fi
  fi
  corpus="$WORK/corpus/$t"
  mkdir -p "$corpus"
  cp -n "$ROOT"/tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  end=$(( $(date +%s) + SECONDS_PER ))
  run=0
  while :; do
    left=$(( end - $(date +%s) ))
    [ "$left" -gt 0 ] || break
    run=$((run + 1))
    log="$WORK/logs/$t.$run.log"
    if "$bin" -max_total_time="$left" -max_len=4096 -timeout=30 -rss_limit_mb=2048 \
         -print_final_stats=1 -artifact_prefix="$WORK/artifacts/$t-" "$corpus" > "$log" 2>&1; then
      :
    else
      echo "[fuzz] $t: CRASH (log $log)"; grep -E "ERROR|SUMMARY|mismatch|!=|Test unit" "$log" | head -8
      status=1
      [ "${KEEP_GOING:-0}" = 1 ] || break
    fi
  done
  execs=$(grep -h "stat::number_of_executed_units" "$WORK"/logs/"$t".[0-9]*.log 2>/dev/null | awk '{s+=$2} END {print s+0}')
  last=$(grep -h "^#[0-9]" "$log" | tail -1 | grep -o "cov: [0-9]* ft: [0-9]*" || true)
  echo "[fuzz] $t: ${SECONDS_PER}s, $execs executions, $last, corpus $(ls "$corpus" | wc -l)"
done
exit $status
