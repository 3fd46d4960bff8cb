#!/usr/bin/env bash
# The GPU machine's whole check of the cuda backend, in one call (device time is scarce):
#   1. binaries: the carried build-cuda/ if it runs there, else configure and build there
#      (GoogleTest from .devdeps/googletest, carried: the machine has none and no network);
#   2. the cuda tests;
#   3. bench/bench_decode.py against flash-linear-attention (its wheel carried in .whl/);
#   4. compute-sanitizer memcheck and racecheck on small cases, within the time left
#      (DEADLINE seconds in all, default 400).
# Run from the repository root; logs go to $OUT (at most 8 files come back from the machine):
#   summary.txt, build.log, tests.log, sanitizer.log, bench.log, <date>-h200-decode.json,
#   Options: --skip-sanitizer, --skip-bench.
# Before the call, on the development machine: build here (the carried build usually runs there),
#   cmake -S . -B build-cuda -G Ninja -DGDN_BUILD_TOOL=OFF && cmake --build build-cuda
#   mkdir -p .devdeps && cp -r /usr/src/googletest .devdeps/   (ignored: .git/info/exclude)
# then the call (fla's wheel in .whl/, git-ignored):
#   run(command="DEADLINE=395 bash scripts/device_check.sh",
#       carry=[".whl", "build-cuda", ".devdeps"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
SANITIZE=1 BENCH=1
for arg in "$@"; do
  case "$arg" in
    --skip-sanitizer) SANITIZE=0 ;;
    --skip-bench) BENCH=0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
START=$(date +%s)
elapsed() { echo "$(( $(date +%s) - START ))s"; }
DEADLINE=${DEADLINE:-400}  # seconds this script may run (the run's limit, less a margin)
left() { local l=$(( DEADLINE - $(date +%s) + START - $1 )); echo $(( l > 1 ? l : 1 )); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu \
  --format=csv >> "$SUMMARY" 2>&1

# ---- 1. binaries
B=${GDN_DEVICE_BUILD:-build-cuda}
libs() { echo "$PWD/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"; }
if LD_LIBRARY_PATH=$(libs) "$B/bin/cuda_device_test" --gtest_list_tests > /dev/null 2>&1 &&
   [ -f "$B/lib/libgdn.so" ]; then
  note "binaries: the carried $B runs here"
else
  note "binaries: the carried $B does not run here; building ($(elapsed))"
  B=build-dev
  {
    set -e
    cmake -S .devdeps/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX=/tmp/gtest -DBUILD_GMOCK=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    cmake --build /tmp/gtest-build -j 16
    cmake --install /tmp/gtest-build
    cmake -S . -B "$B" -G Ninja -DGDN_BUILD_TOOL=OFF -DGTEST_ROOT=/tmp/gtest \
      -DCMAKE_PREFIX_PATH=/tmp/gtest -DGDN_CUDA_PTXAS_VERBOSE=ON
    cmake --build "$B" -j 16
  } > "$OUT/build.log" 2>&1 || { note "BUILD FAILED ($(elapsed))"; tail -40 "$OUT/build.log"; exit 1; }
  note "binaries: built $B ($(elapsed))"
fi
export LD_LIBRARY_PATH=$(libs)

# ---- 2. tests
TESTS=$OUT/tests.log
: > "$TESTS"
run_test() {  # label, env assignments..., binary, gtest args...
  local label=$1; shift
  echo "===== $label" >> "$TESTS"
  local from=$(( $(wc -l < "$TESTS") + 1 ))
  env "$@" >> "$TESTS" 2>&1
  local rc=$?
  note "tests $label: rc=$rc $(tail -n +"$from" "$TESTS" | grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' | tr '\n' ' ')"
}
run_test device "$B/bin/cuda_device_test" --gtest_brief=1
run_test cases "$B/bin/cuda_cases_test" --gtest_brief=1
grep -h "host cost" "$TESTS" | tee -a "$SUMMARY"
grep -E '^\[  FAILED  \]' "$TESTS" | sort -u | head -40 | tee -a "$SUMMARY"
note "tests done ($(elapsed))"

# ---- 3. benchmark
if [ "$BENCH" = 1 ]; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
       > "$OUT/bench.log" 2>&1; then
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  else
    note "fla wheel did not install: the peer columns stay empty"
  fi
  timeout "$(left 30)" python3 bench/bench_decode.py --lib "$B/lib/libgdn.so" --out "$OUT" >> "$OUT/bench.log" 2>&1
  note "bench: rc=$? ($(elapsed))"
  sed -n '/^results:/,$p' "$OUT/bench.log"
fi

# ---- 4. compute-sanitizer (each run within the time left)
if [ "$SANITIZE" = 1 ]; then
  SAN=$OUT/sanitizer.log
  : > "$SAN"
  sanitize() {  # label, tool, env assignments..., binary, args...
    local label=$1 tool=$2; shift 2
    echo "===== $label ($tool)" >> "$SAN"
    if [ "$(left 0)" -lt 30 ]; then note "sanitizer $label $tool: skipped (time)"; return; fi
    timeout "$(left 5)" env "$@" 2>&1 | tail -n 200 >> "$SAN"
    local rc=${PIPESTATUS[0]}
    note "sanitizer $label $tool: rc=$rc $(grep -E 'ERROR SUMMARY' "$SAN" | tail -n 1)"
  }
  CS="compute-sanitizer --error-exitcode 9 --print-limit 20"
  small='--gtest_filter=Cuda/Table.*:Cuda/Extra.decode*:Cuda/Extra.verify*:Cuda/Extra.packed*'
  sanitize cases memcheck $CS --tool memcheck "$B/bin/cuda_cases_test" --gtest_brief=1 "$small"
  sanitize device memcheck $CS --tool memcheck "$B/bin/cuda_device_test" --gtest_brief=1 \
    '--gtest_filter=InvalidIndices.*:Graph.*:Streams.*'
  # the kv kernel exchanges partial sums through shared memory
  sanitize table racecheck $CS --tool racecheck "$B/bin/cuda_cases_test" --gtest_brief=1 '--gtest_filter=Cuda/Table.*'
  sanitize device racecheck $CS --tool racecheck "$B/bin/cuda_device_test" --gtest_brief=1 \
    '--gtest_filter=InvalidIndices.*:Graph.*:Streams.*'
  note "sanitizer done ($(elapsed))"
fi

echo
cat "$SUMMARY"
