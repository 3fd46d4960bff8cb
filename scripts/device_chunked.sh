#!/usr/bin/env bash
# The GPU machine's check of the cuda chunked prefill kernel, in one call (device time is
# scarce):
#   1. binaries: the carried build-chunk-carry/ (libgdn and cuda_chunked_test built on the
#      development machine by --pack) if they run there, else configure and build there
#      (GoogleTest from .devdeps/googletest, carried: the machine has none and no network);
#   2. cuda_chunked_test, every case; then cuda_cases_test (the recurrent kernel's cases: path
#      auto sends T >= 64 bf16 / f16 calls to the chunked kernel now);
#   3. --profile: Nsight Compute on one launch (prefill-1x4096), details and per-SASS-line
#      samples (ncu_details.txt, ncu_source.csv);
#   4. bench/bench_prefill.py against flash-linear-attention (its wheel carried in .whl/);
#   5. --sanitize: compute-sanitizer racecheck and memcheck on two small cases.
# Logs go to $OUT (at most 8 files come back): summary.txt, tests.log, cases.log, bench.log,
# <date>-h200-prefill.json, and ncu_* or sanitizer.log, build.log (when it builds).
# DEADLINE (seconds, default 330) bounds the whole script; SKIP_BENCH=1 skips it; NCU_KERNEL is the
# profiled kernel's regex (default chunked_prefill); BENCH_CASES=a,b picks benchmark
# cases; BENCH_ARGS replaces the benchmark's extra options (default --crossover; e.g.
# "--forms fused,split").
#
# On the development machine, first:   bash scripts/device_chunked.sh --pack
# then: run(command="bash scripts/device_chunked.sh [--profile] [--sanitize]", carry=[".whl", "build-chunk-carry", ".devdeps"],
#           timeout_s=360)
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=build-chunk-carry
if [ "${1:-}" = "--pack" ]; then  # copy the built library and test (no symlinks: they travel as links)
  B=${BUILD:-build-chunk}
  rm -rf "$CARRY" && mkdir -p "$CARRY/lib" "$CARRY/bin"
  cp -L "$B/lib/libgdn.so" "$CARRY/lib/libgdn.so.0.1"
  cp -L "$B/lib/libgdn.so" "$CARRY/lib/libgdn.so"
  cp "$B/bin/cuda_chunked_test" "$CARRY/bin/"
  [ -f "$B/bin/cuda_cases_test" ] && cp "$B/bin/cuda_cases_test" "$CARRY/bin/"
  cp -L /usr/lib/x86_64-linux-gnu/libgomp.so.1 "$CARRY/lib/" 2>/dev/null || true
  du -sh "$CARRY"
  exit 0
fi

PROFILE=0 SANITIZE=0
for arg in "$@"; do
  case "$arg" in
    --profile) PROFILE=1 ;;
    --sanitize) SANITIZE=1 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
START=$(date +%s)
DEADLINE=${DEADLINE:-330}
elapsed() { echo "$(( $(date +%s) - START ))"; }
left() { local l=$(( DEADLINE - $(date +%s) + START - ${1:-0} )); echo $(( l > 1 ? l : 1 )); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu \
  --format=csv >> "$SUMMARY" 2>&1

# ---- 1. binaries
B=${GDN_DEVICE_BUILD:-$CARRY}
libs() { echo "$PWD/$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"; }
if LD_LIBRARY_PATH=$(libs) "$B/bin/cuda_chunked_test" --gtest_list_tests > /dev/null 2>&1; then
  note "binaries: the carried $B runs here"
  LIB=$PWD/$B/lib/libgdn.so
else
  note "binaries: the carried $B does not run here; building ($(elapsed)s)"
  B=build-dev
  {
    set -e
    cmake -S .devdeps/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX=/tmp/gtest -DBUILD_GMOCK=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    cmake --build /tmp/gtest-build -j 16
    cmake --install /tmp/gtest-build
    cmake -S . -B "$B" -G Ninja -DGDN_BUILD_TOOL=OFF -DGTEST_ROOT=/tmp/gtest -DCMAKE_PREFIX_PATH=/tmp/gtest
    cmake --build "$B" -j 16 --target cuda_chunked_test
  } > "$OUT/build.log" 2>&1 || { note "BUILD FAILED ($(elapsed)s)"; tail -40 "$OUT/build.log"; exit 1; }
  note "binaries: built $B ($(elapsed)s)"
  LIB=$PWD/$B/lib/libgdn.so
fi
export LD_LIBRARY_PATH=$(libs)

# ---- 2. tests
TESTS=$OUT/tests.log
timeout "$(left 200)" "$B/bin/cuda_chunked_test" --gtest_brief=0 > "$TESTS" 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED) +\]' "$TESTS" | tr '\n' ' ') ($(elapsed)s)"
grep -E '^\[  FAILED  \]' "$TESTS" | sort -u | head -40 | tee -a "$SUMMARY"
grep -E 'rel L2|Failure|Expected|Which is|error' "$TESTS" | head -30 | tee -a "$SUMMARY"
if [ -x "$B/bin/cuda_cases_test" ]; then
  timeout "$(left 200)" "$B/bin/cuda_cases_test" --gtest_brief=1 > "$OUT/cases.log" 2>&1
  note "cuda_cases_test: rc=$? $(grep -E '^\[  (PASSED|FAILED) +\]' "$OUT/cases.log" | tr '\n' ' ') ($(elapsed)s)"
  grep -E '^\[  FAILED  \]|rel L2' "$OUT/cases.log" | sort -u | head -20 | tee -a "$SUMMARY"
fi

# ---- 3. the fla wheel; the profile
if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
     .whl/*.whl > "$OUT/bench.log" 2>&1; then
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
else
  note "fla wheel did not install: the peer columns stay empty"
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
if [ "$PROFILE" = 1 ] && [ -n "$NCU" ]; then
  timeout "$(left 170)" "$NCU" --clock-control none -k "regex:${NCU_KERNEL:-chunked_prefill}" --launch-count 1 --set full \
    --import-source no -f -o /tmp/prof python3 bench/bench_prefill.py --lib "$LIB" --out /tmp/ncu-bench \
    --cases prefill-1x4096 --no-peer --rep 5 > "$OUT/ncu.log" 2>&1
  note "profile: rc=$? ($(elapsed)s)"
  "$NCU" --import /tmp/prof.ncu-rep --page details > "$OUT/ncu_details.txt" 2>> "$OUT/ncu.log"
  "$NCU" --import /tmp/prof.ncu-rep --page source --csv --print-source sass > "$OUT/ncu_source.csv" 2>> "$OUT/ncu.log"
  grep -E "Duration|Registers|Issue Slots Busy|Executed Ipc A|Compute \(SM\) Throughput|Memory Throughput|Tensor|Shared" \
    "$OUT/ncu_details.txt" | head -20 | tee -a "$SUMMARY"
fi

# ---- 4. benchmark
if [ "${SKIP_BENCH:-0}" != 1 ]; then
BENCH_LEFT=$(( $(left 40) - 60 ))
timeout "$(left 40)" python3 bench/bench_prefill.py --lib "$LIB" --out "$OUT" ${BENCH_ARGS---crossover} ${BENCH_CASES:+--cases "$BENCH_CASES"} \
  --deadline "$(( BENCH_LEFT > 1 ? BENCH_LEFT : 1 ))" >> "$OUT/bench.log" 2>&1
note "bench: rc=$? ($(elapsed)s)"
sed -n '/^results:/,$p' "$OUT/bench.log" | tee -a "$SUMMARY"
fi

# ---- 5. compute-sanitizer on small cases, within the time left
SAN=$OUT/sanitizer.log
[ "$SANITIZE" = 1 ] && : > "$SAN"
[ "$SANITIZE" = 1 ] && for spec in "racecheck:Chunked/Oracle.MatchesOracle/t65_l2norm" \
            "memcheck:Chunked/Oracle.MatchesOracle/packed_zero_len_pool_inplace:Device.InvalidIndicesWriteNothing:Forms.SegmentsMatchUnsplit"; do
  tool=${spec%%:*} filter=${spec#*:}
  if [ "$(left 0)" -lt 25 ]; then note "sanitizer $tool: skipped (time)"; continue; fi
  echo "===== $tool $filter" >> "$SAN"
  timeout "$(left 5)" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 \
    "$B/bin/cuda_chunked_test" --gtest_brief=1 "--gtest_filter=$filter" 2>&1 | tail -n 60 >> "$SAN"
  note "sanitizer $tool: rc=${PIPESTATUS[0]} $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$SAN" | tail -n 1) ($(elapsed)s)"
done

echo
cat "$SUMMARY"
