#!/usr/bin/env bash
# Compatibility gate: runs upstream xgrammar 0.2.8's own Python test suite against xgrammar2.
#
#   tests/compat/run_upstream_suite.sh [--reference] [--docs] [extra pytest args]
#
# * Gets the pinned sdist (pip download, cached under $XGR2_CACHE/upstream-sdist, sha256
#   checked) and unpacks its tests/ (conftest.py + tests/python) into the cache; no upstream
#   code is stored in this repository.
# * Runs it with pytest (split over up to 4 pytest-xdist workers, one per core, when xdist is
#   installed; XGR2_TEST_WORKERS overrides, 0 = one process), with our plugins (tests/compat):
#   alias_plugin maps `import xgrammar[.X]` to xgrammar2[.X]; hub_plugin serves hub tokenizer names from
#   ../shared/data/tokenizers (others skip: "tokenizer not available: NAME").
# * --reference: the same harness without the alias, against the real xgrammar 0.2.8
#   installed in the venv (the reference numbers in docs/compat.md).
# * Test failures do not fail this script: pytest's exit status is replaced by the ratchet
#   (tests/compat/ratchet.json, minimum pass count of our run). It fails on harness errors
#   (download / checksum / pytest internal or usage errors / nothing collected).
# * --docs: afterwards, rewrite docs/compat.md from the latest junit XML of both runs.
# Results (junit XML, log) go to $XGR2_COMPAT_OUT (default $XGR2_CACHE/upstream-compat/results).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/compat"

VERSION=0.2.8
SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
PER_TEST_TIMEOUT="${XGR2_COMPAT_TIMEOUT:-60}"

MODE=ours
DOCS=0
ARGS=()
for a in "$@"; do
  case "$a" in
    --reference) MODE=reference ;;
    --docs) DOCS=1 ;;
    *) ARGS+=("$a") ;;
  esac
done

CACHE="${XGR2_CACHE:-$HOME/.cache/xgrammar2}"
SDIST_DIR="$CACHE/upstream-sdist"
SDIST="$SDIST_DIR/xgrammar-$VERSION.tar.gz"
SUITE="$CACHE/upstream-compat/suite-$VERSION"
OUT="${XGR2_COMPAT_OUT:-$CACHE/upstream-compat/results}"
die() { echo "[compat] harness error: $*" >&2; exit 2; }

# --- Python environment: the test venv (sourced from .ci/env.sh unless already active) -----
if [ -z "${VIRTUAL_ENV:-}" ] || ! python -c "import xgrammar2" >/dev/null 2>&1; then
  # shellcheck source=/dev/null
  source "$ROOT/.ci/env.sh"
fi
PY=python
# harness needs (gguf: the Llama-2 vocabulary is a GGUF file) and upstream's test extra
# (cohere_melody renders Cohere's CMD5 tool calls); installed into the venv only when missing
need=()
"$PY" -c "import gguf" >/dev/null 2>&1 || need+=("gguf")
"$PY" -c "import pytest_timeout" >/dev/null 2>&1 || need+=("pytest-timeout")
"$PY" -c "import cohere_melody" >/dev/null 2>&1 || need+=("cohere_melody==0.13.0")
if [ "$MODE" = reference ]; then
  "$PY" -c "import xgrammar, importlib.metadata as m; assert m.version('xgrammar') == '$VERSION'" \
    >/dev/null 2>&1 || need+=("xgrammar==$VERSION")
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "[compat] installing into the venv: ${need[*]}"
  "$PY" -m pip install -q --disable-pip-version-check "${need[@]}" >/dev/null \
    || die "pip install ${need[*]} failed"
fi

# --- the pinned sdist ------------------------------------------------------------------------
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -c1-64)" = "$SHA256" ]; }
if ! sha_ok "$SDIST"; then
  echo "[compat] downloading xgrammar==$VERSION sdist"
  mkdir -p "$SDIST_DIR"
  tmp="$(mktemp -d "$SDIST_DIR/dl.XXXXXX")"
  printf 'xgrammar==%s --hash=sha256:%s\n' "$VERSION" "$SHA256" > "$tmp/req.txt"
  # Only xgrammar itself is forced to source (`--no-binary xgrammar`): pip prepares the sdist's
  # metadata, and `--no-binary :all:` would also build its build requirements (cmake, ...)
  # from source, which takes many minutes.
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary xgrammar \
      --require-hashes -r "$tmp/req.txt" -d "$tmp" >"$tmp/pip.log" 2>&1 \
    || { cat "$tmp/pip.log" >&2; rm -rf "$tmp"; die "pip download xgrammar==$VERSION failed"; }
  sha_ok "$tmp/xgrammar-$VERSION.tar.gz" || { rm -rf "$tmp"; die "sha256 mismatch for the sdist"; }
  mv "$tmp/xgrammar-$VERSION.tar.gz" "$SDIST"
  rm -rf "$tmp"
fi
if [ ! -f "$SUITE/.unpacked-$SHA256" ]; then
  rm -rf "$SUITE"
  mkdir -p "$SUITE"
  tar -xzf "$SDIST" -C "$SUITE" --strip-components=1 \
      "xgrammar-$VERSION/tests/conftest.py" "xgrammar-$VERSION/tests/python" \
    || die "cannot unpack tests/ from $SDIST"
  # our own ini (upstream's lives in its pyproject.toml, which is not unpacked)
  cat > "$SUITE/tests/pytest.ini" <<'EOF'
[pytest]
markers =
    hf_token_required: upstream marker (hub tokenizers; served locally by hub_plugin)
    thread_unsafe: upstream marker
junit_family = xunit1
EOF
  touch "$SUITE/.unpacked-$SHA256"
fi
[ -f "$SUITE/tests/python/test_grammar_compiler.py" ] || die "unpacked suite incomplete: $SUITE"

# --- run -------------------------------------------------------------------------------------
if [ "$MODE" = ours ]; then
  PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "import alias_plugin, xgrammar, xgrammar.testing as t, xgrammar2
assert xgrammar is xgrammar2 and t is xgrammar2.testing" || die "the xgrammar -> xgrammar2 alias does not work"
fi
mkdir -p "$OUT"
# a run with extra pytest args is partial: it gets its own files and no ratchet
TAG="$MODE"; [ ${#ARGS[@]} -gt 0 ] && TAG="$MODE-partial"
JUNIT="$OUT/$TAG.xml"
LOG="$OUT/$TAG.log"
plugins=(-p hub_plugin)
# pytest-xdist workers, a whole file per worker in file order (--dist loadfile): some upstream
# tests read what an earlier test of their file stored (test_tokenizer_info's tokenizer table), so
# tests are not spread one by one; the pass count equals the one-process run's.
mapfile -t xdist < <(bash "$ROOT/tests/xdist_args.sh" "$PY" --dist loadfile)
plugins+=("${xdist[@]}")
[ "$MODE" = ours ] && plugins=(-p alias_plugin "${plugins[@]}")
echo "[compat] running upstream xgrammar $VERSION tests/python against $([ "$MODE" = ours ] && echo xgrammar2 || echo 'real xgrammar') (log: $LOG)"
start=$(date +%s)
set +e
(
  cd "$SUITE/tests"
  export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  export PYTHONDONTWRITEBYTECODE=1
  # a fixed hash seed: some upstream parametrizations come from sets, and xdist needs every
  # worker to collect the same ids in the same order
  export PYTHONHASHSEED=0
  unset HF_TOKEN HUGGING_FACE_HUB_TOKEN
  "$PY" -m pytest -q --tb=short -c "$SUITE/tests/pytest.ini" --rootdir "$SUITE/tests" \
      -p no:cacheprovider -p no:randomly "${plugins[@]}" \
      --continue-on-collection-errors --timeout "$PER_TEST_TIMEOUT" \
      --junitxml "$JUNIT" -o junit_logging=no -W ignore::DeprecationWarning \
      python ${ARGS[@]+"${ARGS[@]}"}
) >"$LOG" 2>&1
rc=$?
set -e
echo "[compat] pytest finished in $(( $(date +%s) - start )) s (exit $rc): $(tail -1 "$LOG")"
# 0: all passed, 1: some tests failed -- both fine here; anything else is a harness error
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
  tail -30 "$LOG" >&2
  die "pytest exited with $rc"
fi
[ -s "$JUNIT" ] || die "no junit XML written"
collected=$("$PY" - "$JUNIT" <<'EOF'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
print(sum(1 for _ in r.iter("testcase")))
EOF
)
[ "$collected" -gt 0 ] || die "no tests collected"

if [ "$DOCS" = 1 ]; then
  "$PY" "$HERE/summarize.py" --ours "$OUT/ours.xml" --reference "$OUT/reference.xml" \
      --out "$ROOT/docs/compat.md" --suite "$SUITE/tests/python" --meta "upstream=xgrammar $VERSION sdist, sha256 $SHA256" \
      --meta "command=tests/compat/run_upstream_suite.sh [--reference] (per-test timeout ${PER_TEST_TIMEOUT} s)"
fi
if [ "$MODE" = ours ]; then
  if [ ${#ARGS[@]} -gt 0 ]; then
    "$PY" "$HERE/summarize.py" --count "$JUNIT" | sed 's/^/[compat] passed (partial run, no ratchet): /'
  else
    "$PY" "$HERE/summarize.py" --ratchet "$HERE/ratchet.json" "$JUNIT"
  fi
else
  echo "[compat] reference: real xgrammar $VERSION passes $("$PY" "$HERE/summarize.py" --count "$JUNIT") tests"
fi
