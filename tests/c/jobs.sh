# Sourced by the C build scripts (tests/c, tests/fuzz): runs commands in the background, at most
# XGR2_BUILD_JOBS (default: one per core) at a time.
#   jobs_start CMD [ARG...]   starts CMD, first waiting for the oldest running one at the limit
#   jobs_wait                 waits for the rest; returns 1 if any started command failed
_jobs_pids=()
_jobs_failed=0
_jobs_max="${XGR2_BUILD_JOBS:-$(nproc)}"
jobs_start() {
  if [ "${#_jobs_pids[@]}" -ge "$_jobs_max" ]; then
    wait "${_jobs_pids[0]}" || _jobs_failed=1
    _jobs_pids=("${_jobs_pids[@]:1}")
  fi
  "$@" &
  _jobs_pids+=("$!")
}
jobs_wait() {
  local p failed
  for p in "${_jobs_pids[@]}"; do wait "$p" || _jobs_failed=1; done
  failed=$_jobs_failed
  _jobs_pids=()
  _jobs_failed=0
  return "$failed"
}
