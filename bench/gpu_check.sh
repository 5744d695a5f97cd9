#!/usr/bin/env bash
# One GPU check, run from the repository root on the device machine (no internet, no cffi):
#
#   OUT=/some/dir bash bench/gpu_check.sh
#
# 1. installs the carried wheels (.whl/: cffi, pycparser, setuptools, pydantic and its deps,
#    typing-extensions, xgrammar 0.2.8 and apache-tvm-ffi) into /tmp/site;
# 2. builds xgrammar2's C core in place (engine/xgrammar2/_xgr2_cffi*.so) with gcc; without
#    Python.h it retries with the CPython 3.12 headers carried in .gpu_data/include, and as a
#    last resort uses the core prebuilt here (.gpu_data/prebuilt, abi3, glibc >= 2.34);
# 3. runs bench/gpu_bitmask.py --quick (apply_token_bitmask_inplace kernels);
# 4. runs bench/gpu_e2e.py (generate() TPOT: none / xgrammar / xgrammar2) on the inputs packed
#    in .gpu_data/e2e (python -m bench.gpu_e2e --write-data .gpu_data/e2e).
#
# Everything it writes goes under $OUT: gpu_bitmask.{md,json}, gpu_e2e.{md,json}, logs, and
# env.txt. Without CUDA (a CPU machine) the same steps run, gpu_bitmask says there is nothing to
# time and gpu_e2e runs its tiny configuration. About 5-6 minutes on an H100; each step has its
# own time limit so the whole script stays within ~7 minutes.
#
# Environment: OUT (default /tmp/xgr2-gpu-out), WHL_DIR (default .whl), SITE (default /tmp/site),
# PYTHON (default python3), E2E_ARGS (extra arguments for gpu_e2e, e.g. "--tokens 64").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
OUT="${OUT:-/tmp/xgr2-gpu-out}"
WHL_DIR="${WHL_DIR:-.whl}"
SITE="${SITE:-/tmp/site}"
PY="${PYTHON:-python3}"
DATA="${E2E_DATA:-.gpu_data/e2e}"
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)
log() { echo "[gpu_check +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/gpu_check.log"; }
status=0

log "environment"
{
  date -u
  uname -a
  "$PY" -V
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi"
  "$PY" - <<'EOF' 2>&1
import importlib
for m in ("torch", "transformers", "triton", "numpy", "tokenizers", "setuptools", "cffi"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "missing:", type(e).__name__, e)
import torch
print("cuda available:", torch.cuda.is_available(), torch.version.cuda)
print("torch has the DLPack exchange API:", hasattr(torch.Tensor, "__dlpack_c_exchange_api__"))
EOF
  gcc --version 2>&1 | head -1 || echo "no gcc"
  nproc
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

log "installing carried wheels from $WHL_DIR into $SITE"
ls "$WHL_DIR"/*.whl > /dev/null || { log "no wheels in $WHL_DIR"; exit 1; }
PIP=(-m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE")
if ! "$PY" -m pip --version > /dev/null 2>&1; then
  log "no pip: unpacking the wheels this Python can use with zipfile"
  "$PY" - "$SITE" "$WHL_DIR"/*.whl <<'EOF'
import sys, zipfile
tag = "cp%d%d" % sys.version_info[:2]
for wheel in sys.argv[2:]:
    if "-none-any.whl" in wheel or f"-{tag}-" in wheel:
        zipfile.ZipFile(wheel).extractall(sys.argv[1])
    else:
        print("skipped", wheel, "(not for this Python)")
EOF
elif ! "$PY" "${PIP[@]}" "$WHL_DIR"/*.whl >> "$OUT/gpu_check.log" 2>&1; then
  log "pip install of all wheels failed (see gpu_check.log): one at a time, skipping those this Python cannot use"
  for w in "$WHL_DIR"/*.whl; do
    "$PY" "${PIP[@]}" "$w" >> "$OUT/gpu_check.log" 2>&1 || log "  skipped $(basename "$w")"
  done
fi
export PYTHONPATH="$SITE"

log "building xgrammar2's C core in place"
rm -f engine/xgrammar2/_xgr2_cffi*.so
built() { ls engine/xgrammar2/_xgr2_cffi*.so > /dev/null 2>&1; }
( timeout 180 "$PY" setup.py -q build_ext --inplace --force -j "$(nproc)" ) > "$OUT/build.log" 2>&1
if built; then
  log "built with setup.py build_ext"
else
  log "setup.py build_ext failed:"
  tail -15 "$OUT/build.log"
  # A Python without its development headers (no Python.h): use the carried CPython 3.12
  # headers (the extension uses the limited API only).
  HDR="$ROOT/.gpu_data/include/python3.12"
  if [ -f "$HDR/Python.h" ]; then
    log "retrying with the carried headers $HDR"
    ( export C_INCLUDE_PATH="$HDR${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}"
      timeout 180 "$PY" setup.py -q build_ext --inplace --force -j "$(nproc)" ) >> "$OUT/build.log" 2>&1
    built && log "built with setup.py build_ext and the carried headers"
  fi
fi
if ! built && [ -f .gpu_data/prebuilt/_xgr2_cffi.abi3.so ]; then
  log "building failed: using the carried prebuilt core ($(head -1 .gpu_data/prebuilt/BUILT_FROM.txt 2>/dev/null))"
  tail -15 "$OUT/build.log"
  cp .gpu_data/prebuilt/_xgr2_cffi.abi3.so engine/xgrammar2/
fi
export PYTHONPATH="$ROOT/engine:$ROOT:$SITE"
if ! "$PY" -c "import xgrammar2, xgrammar2._core as c; assert c.AVAILABLE, 'core not loaded'; print('xgrammar2', xgrammar2.__version__, xgrammar2.__file__)" 2>&1 | tee -a "$OUT/gpu_check.log"; then
  log "xgrammar2 does not import: see $OUT/build.log"
  tail -30 "$OUT/build.log"
  exit 1
fi
# Upstream xgrammar's apache-tvm-ffi JIT-compiles a torch extension at import when torch lacks
# the DLPack exchange API (older torch); cap that, and import without it if it is too slow.
if ! timeout 150 "$PY" -c "import xgrammar, xgrammar.contrib.hf; print('xgrammar', xgrammar.__file__)" \
    > "$OUT/xgrammar_import.log" 2>&1; then
  log "importing upstream xgrammar failed or took over 150 s: retrying with TVM_FFI_DISABLE_TORCH_C_DLPACK=1"
  tail -5 "$OUT/xgrammar_import.log"
  export TVM_FFI_DISABLE_TORCH_C_DLPACK=1
  timeout 60 "$PY" -c "import xgrammar, xgrammar.contrib.hf; print('xgrammar', xgrammar.__file__)" \
      >> "$OUT/xgrammar_import.log" 2>&1
fi
tail -2 "$OUT/xgrammar_import.log" | tee -a "$OUT/gpu_check.log"

log "bench/gpu_bitmask.py --quick"
timeout 120 "$PY" -m bench.gpu_bitmask --quick --out "$OUT/gpu_bitmask.json" > "$OUT/gpu_bitmask.md" 2> "$OUT/gpu_bitmask.log"
rc=$?
log "gpu_bitmask exit $rc (2 = no CUDA device, 124 = time limit)"
tail -5 "$OUT/gpu_bitmask.log"
head -40 "$OUT/gpu_bitmask.md"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; then status=1; fi

log "bench/gpu_e2e.py"
E2E_DATA_ARG=()
if [ -f "$DATA/schemas.json" ]; then E2E_DATA_ARG=(--data "$DATA"); else log "no $DATA: reading ../shared/data"; fi
# shellcheck disable=SC2086
timeout 300 "$PY" -m bench.gpu_e2e "${E2E_DATA_ARG[@]}" --out "$OUT/gpu_e2e.md" --budget-s 200 ${E2E_ARGS:-} \
    > "$OUT/gpu_e2e.stdout" 2> "$OUT/gpu_e2e.log"
rc=$?
log "gpu_e2e exit $rc (1 = grammar violations, 124 = time limit)"
tail -25 "$OUT/gpu_e2e.log"
cat "$OUT/gpu_e2e.md" 2>/dev/null || tail -40 "$OUT/gpu_e2e.stdout"
if [ "$rc" -ne 0 ]; then status=1; fi

log "done (status $status); outputs in $OUT"
ls -la "$OUT"
exit $status
