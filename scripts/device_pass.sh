#!/usr/bin/env bash
# The whole GPU check-and-measure pass, in one call of the GPU machine (its time is scarce):
#   recurrent  scripts/device_check.sh: the cuda recurrent tests (oracle cases, invalid device
#              indices, graph capture, two streams), decode benchmark against
#              flash-linear-attention, compute-sanitizer memcheck and racecheck (RECURRENT_ARGS:
#              its options, e.g. --skip-bench);
#   chunked    the chunked prefill tests (every form; the 2^20-token sequence; the diagonal-block
#              inverses alone, cuda_inverse_blocks_test), compute-sanitizer
#              racecheck and memcheck on a few of them; CHUNKED_LIBS="lib NAME ..." picks the
#              builds the tests run on (lib: the packed one, the default; NAME: an --add-lib
#              build), CHUNKED_SANITIZE the builds the sanitizers run on (unset: lib; empty: none);
#   prefill    bench/bench_prefill.py: BENCH.md's prefill cases against flash-linear-attention,
#              ours as the library chooses and in the forms PREFILL_FORMS (default fused,split:1;
#              empty: none),
#              PREFILL_S seconds (default 240), PREFILL_CASES picks cases, PREFILL_ARGS more options
#              (e.g. --checkpoints 64);
#   tool       gdn info / check / demo / bench (decode, two prefill cases) on the cuda backend,
#              gdn run --path chunked against --path recurrent on a safetensors file
#              (scripts/tool_chunked_check.py), and the oracle against the
#              transformers Qwen3-Next functions (scripts/oracle_vs_transformers.py);
#   python     the package built there (pip, in the background from the start), then
#              bench/bench_binding_overhead.py, scripts/hf_layer_check.py and
#              scripts/python_gpu_check.py, the quickest first (the last compiles the peer's
#              kernels for 32 shapes unless the Triton cache is warm; PYTHON_CHECKS="a.py --x;b.py"
#              picks others; PYTHON_CHECK_S seconds each, default 300);
#   decode     (not in the default list) bench/bench_decode.py on DECODE_CASES (a regular expression,
#              default B = 1 to 1024 vk and serving) for the packed build and every --add-lib
#              build (DECODE_LIBS picks them), alternating, DECODE_REPEATS times (default 2), the
#              peer beside each;
#   lab        (not in the default list) bench/decode_lab.cu: the library's decode kernels
#              against the lab's register design and a copy of the same bytes (about a minute);
#   wgmma      (not in the default list) bench/wgmma_lab.cu: which shared-memory layouts and
#              descriptors wgmma reads as the chain kernel would use it (seconds);
#   wgmmarate  (not in the default list) bench/wgmma_rate_lab.cu: cycles a wgmma of the chain
#              step's shapes takes, for each B layout the chunked kernels use (seconds);
#   chainlab   (not in the default list) bench/chain_lab.cu: the chain step on mma.sync (the
#              library's functions) against wgmma with the state as accumulators (seconds);
#   aheadlab   (not in the default list) bench/chain_ahead_lab.cu: the split form's wgmma chain
#              step (the library's functions) against a step that looks one chunk ahead (seconds);
#   labprofile (not in the default list) Nsight Compute on one launch of the chain lab's kernel
#              LABPROFILE_KERNEL (a regular expression, default chain_today: the library's step
#              on L2-resident images): details, stall samples by stretch and the top instructions;
#   compare    (not in the default list) same-run timings, no peer, of the packed build and every
#              build added with --add-lib, alternating, COMPARE_REPEATS times (default 2), on
#              COMPARE_CASES (default the fused cases, Hv 64 and 1 x 65536), COMPARE_LIBS the
#              builds ("lib NAME ...", default all), COMPARE_ENVS settings each build runs under
#              ("VAR=x VAR2=y;VAR=z": each in turn), COMPARE_ARGS more bench_prefill.py options:
#              how a change is measured against the build before it;
#   boundary   (not in the default list) scripts/form_boundary.sh: the fused / split boundary of the
#              chunked path's cost model, each case as chosen and with each form forced;
#   sweep      (not in the default list) scripts/settings_sweep.sh: SWEEP_CASES each timed by gdn
#              bench under each of SWEEP_SETTINGS ("VAR=x VAR2=y;VAR=z"; a plan's constants);
#   stress     (not in the default list) Forms.SplitCallsAreDeterministic over STRESS_REPEATS
#              (default 300) fresh input sets, for the builds STRESS_LIBS (default lib): the split
#              form's calls twice, by both prepare instances, in windows, bit for bit; then the
#              other same-bits tests STRESS_GTEST_REPEAT times (default 40; STRESS_REPEAT_FILTER),
#              and the recurrent kernel's (cuda_device_test, where packed: not with --slim);
#   hostcost   (not in the default list) bench/host_cost_lab.cu: the host time of a plain decode
#              call against its parts (pointer queries, device query, an empty launch), on an idle
#              stream and back to back, for the builds HOSTCOST_LIBS ("lib NAME ...", default lib)
#              alternating HOSTCOST_REPEATS times (default 1) (seconds each);
#   coresidence (not in the default list) bench/coresidence_lab.cu: whether a prepare-shaped CTA
#              runs beside a chain-shaped CTA on one SM, for a few register plans (seconds);
#   kernels    (not in the default list) each chunked kernel's duration (Nsight Compute, ns), the
#              first KERNELS_COUNT (default 6) launches matching KERNELS_REGEX (default
#              chunk|segment: every chunked kernel, the combine too) of KERNELS_CASE (default prefill-1x16384;
#              a case string "N=...,decay=none": gdn bench's generated case on the build)
#              under each of KERNELS_ENVS ("VAR=x VAR2=y;VAR=z": default the split form in one pass);
#              KERNELS_METRICS (default gpu__time_duration.sum) the Nsight Compute metrics,
#              KERNELS_LIBS the builds ("lib NAME ...", default lib), KERNELS_ARGS more bench_prefill.py
#              options (e.g. --inputs f32);
#   trace      (not in the default list) bench/ws_trace.py: the fused kernel's timeline by role
#              (clock64 marks at its hand-offs) on TRACE_CASE (default prefill-4x8192), with the
#              --add-lib builds TRACE_LIB (default trace; "a b": each), configured with -DGDN_WS_TRACE=ON:
#                cmake -S . -B build-trace -DGDN_WS_TRACE=ON -DGDN_BUILD_TESTS=OFF -DGDN_BUILD_TOOL=OFF
#                cmake --build build-trace --target gdn
#                bash scripts/device_pass.sh --add-lib trace build-trace/lib/libgdn.so
#              (seconds); TRACE_KEYS="spec raw": each lib on bench_prefill.py's --keys of each
#              (raw: q and k normalised in the kernel);
#   profile    (not in the default list) Nsight Compute on one launch of NCU_KERNEL (default the
#              chain kernel) in PROFILE_CASE (default prefill-1x4096), PROFILE_FORM (default
#              the library's choice): the details page, per-SASS-instruction samples, and
#              those samples by stretch between barriers and by role (scripts/ncu_regions.py);
#              PROFILE_LIB the build (default lib), PROFILE_ARGS more bench_prefill.py options
#              (e.g. --inputs f32).
# Binaries are built here and carried (the machine has no GoogleTest, CLI11 or network):
#   bash scripts/device_pass.sh --pack          # copies build/bin and build/lib to .devbuild/
#   bash scripts/device_pass.sh --pack --slim   # only gdn and cuda_chunked_test (about 13 MB: room
#                                               # for .devcache beside it; phases chunked, prefill,
#                                               # tool, compare, kernels, profile)
#   bash scripts/device_pass.sh --add-lib NAME FILE   # another build's libgdn.so, for compare
#                                               # (scripts/commit_libs.sh builds one a commit)
#   run(command="bash scripts/device_pass.sh [PHASE ...]", carry=[".whl", ".devbuild", ".devdeps", ".devcache"],
#       timeout_s=580)
# What comes back ($OUT, at most 8 files): summary.txt, logs.tgz, the results JSON files, and
# the peer's compiled Triton kernels as triton-cache.tgz.part0, part1, ... (15 MiB each, at most
# three): copy them to .devcache/ (ignored), replacing what is there, and name .devcache in
# carry when the pass runs the peer (phases prefill, python, recurrent), for a warm start. The
# carry limit is 64 MiB in all: a large cache goes with .devbuild only while both fit (a --slim
# pack leaves room for 45 MiB), and alone (with .whl and .devdeps) for a call of phase python
# only, which builds the package itself.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--pack" ]; then
  B=${BUILD:-build}
  rm -rf .devbuild && mkdir -p .devbuild/bin .devbuild/lib
  if [ "${2:-}" = "--slim" ]; then
    cp -L "$B"/bin/gdn "$B"/bin/cuda_chunked_test "$B"/bin/cuda_inverse_blocks_test .devbuild/bin/
    cp -L "$B"/bin/gdn_*_lab .devbuild/bin/ 2>/dev/null  # small; phases wgmma, chainlab, aheadlab, coresidence
  else
    cp -L "$B"/bin/* .devbuild/bin/  # gdn_decode_lab among them when built with GDN_CUDA
    [ -x .devbuild/bin/gdn_decode_lab ] || echo "note: $B/bin/gdn_decode_lab not built (phase lab needs it)"
  fi
  cp -L "$B"/lib/libgdn.so .devbuild/lib/ && cp -L "$B"/lib/libgdn.so .devbuild/lib/libgdn.so.0.1
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include || echo -dirty)" > .devbuild/COMMIT
  cp -L /usr/lib/x86_64-linux-gnu/libgomp.so.1 .devbuild/lib/
  [ -d .devdeps/googletest ] || cp -r /usr/src/googletest .devdeps/
  du -sh .devbuild .whl
  exit 0
fi

if [ "${1:-}" = "--add-lib" ]; then  # .devbuild/lib-NAME: FILE as libgdn.so, beside the packed build
  [ $# -eq 3 ] && [ -f "$3" ] && [ -d .devbuild/lib ] || { echo "usage (after --pack): $0 --add-lib NAME FILE" >&2; exit 2; }
  D=.devbuild/lib-$2
  rm -rf "$D" && mkdir -p "$D"
  # (the soname a link to it: half the carry, so that more builds fit its 64 MiB)
  cp -L "$3" "$D/libgdn.so" && ln -s libgdn.so "$D/libgdn.so.0.1" && cp .devbuild/lib/libgomp.so.1 "$D/"
  du -sh .devbuild
  exit 0
fi

PHASES=${*:-recurrent chunked prefill tool python}
FINAL=${OUT:-$PWD/device-out}
WORK=/tmp/gdn-pass
rm -rf "$WORK" && mkdir -p "$WORK"/{recurrent,chunked,tool,python,compare,lab,profile} "$FINAL"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
export GDN_DEVICE_BUILD=.devbuild
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$FINAL/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
START=$(date +%s)
elapsed() { echo "$(( $(date +%s) - START ))s"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
BIN=.devbuild/bin
# the build folders named in $1 ("lib NAME ...": lib the packed build, NAME an --add-lib one), or
# every one when $1 is empty
builds() {
  if [ -z "$1" ]; then
    for d in .devbuild/lib .devbuild/lib-*; do [ -f "$d/libgdn.so" ] && echo "$d"; done
  else
    for name in $1; do [ "$name" = lib ] && echo .devbuild/lib || echo ".devbuild/lib-$name"; done
  fi
}
# The peer's compiled Triton kernels from an earlier pass (its compiles and autotuning took minutes
# of each pass: the Python check's 32 shapes alone more than 170 s): an earlier pass returns
# them in parts; copied to .devcache/ they travel with the next call (carry) and fill the cache
# before anything runs (a warm machine keeps its own).
if [ ! -d /tmp/triton-cache ] && compgen -G ".devcache/triton-cache.tgz.part*" > /dev/null; then
  mkdir -p /tmp/triton-cache && cat .devcache/triton-cache.tgz.part* | tar xzf - -C /tmp/triton-cache \
    && note "triton cache: $(find /tmp/triton-cache -type f | wc -l) files from .devcache/"
fi
# the packed build's commit (--pack records it: this copy's git metadata may lag the working tree)
COMMIT=$(cat .devbuild/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
export GDN_COMMIT=$COMMIT

# the peer and its dependency, for every benchmark and check that compares with it
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  > "$WORK/pip-peer.log" 2>&1 && note "peer: fla-core installed" || note "peer: fla-core did NOT install"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}  # every phase that compares with the peer

# ---- python package build, in the background (CPU work beside the GPU tests)
if has python; then
  rm -rf /tmp/gdn-py  # pip --target keeps a package already there (a warm machine's)
  ( CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/gdn-py \
      -Cbuild-dir=/tmp/gdn-py-build -Ccmake.define.GDN_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" . \
      > "$WORK/python/build.log" 2>&1; echo $? > "$WORK/python/build.rc" ) &
  PYBUILD=$!
fi

if has recurrent; then
  OUT=$WORK/recurrent DEADLINE=${RECURRENT_S:-230} bash scripts/device_check.sh ${RECURRENT_ARGS:-} > "$WORK/recurrent/stdout.log" 2>&1
  note "== recurrent ($(elapsed))"; cat "$WORK/recurrent/summary.txt" >> "$SUMMARY"
  cp "$WORK"/recurrent/*-decode.json "$FINAL"/ 2>/dev/null
fi

if has chunked; then
  failed=" "  # builds whose tests failed or timed out: no sanitizer runs on them
  for d in $(builds "${CHUNKED_LIBS:-lib}"); do
    name=$(basename "$d")
    # (every test's start in the log: a test that hangs is the last one started)
    LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 timeout 240 "$BIN/cuda_chunked_test" \
      > "$WORK/chunked/tests-$name.log" 2>&1
    rc=$?
    note "== chunked tests ($name): rc=$rc $(grep -E '^\[  (PASSED|FAILED) +\]' "$WORK/chunked/tests-$name.log" | tr '\n' ' ') ($(elapsed))"
    [ $rc -eq 0 ] || { failed="$failed$name "; grep -E '^\[ RUN' "$WORK/chunked/tests-$name.log" | tail -n 1 | tee -a "$SUMMARY"
                       cp "$WORK/chunked/tests-$name.log" "$FINAL/"; }  # (the failures' figures)
    grep -E '^\[  FAILED  \]' "$WORK/chunked/tests-$name.log" | sort -u | head -20 | tee -a "$SUMMARY"
    grep -E '^2\^20 tokens' "$WORK/chunked/tests-$name.log" | tee -a "$SUMMARY"
  done
  if [ -x "$BIN/cuda_inverse_blocks_test" ]; then  # the diagonal-block inverses alone (no library call)
    timeout 60 "$BIN/cuda_inverse_blocks_test" --gtest_brief=1 > "$WORK/chunked/inverse-blocks.log" 2>&1
    note "== inverse blocks test: rc=$? $(grep -E '^\[  (PASSED|FAILED) +\]' "$WORK/chunked/inverse-blocks.log" | tr '\n' ' ')"
  fi
  for d in $( [ -n "${CHUNKED_SANITIZE-lib}" ] && builds "${CHUNKED_SANITIZE-lib}"); do
    name=$(basename "$d")
    case "$failed" in *" $name "*) note "chunked sanitizers ($name): skipped, its tests failed"; continue ;; esac
    # racecheck: a small case in every form (and the f32 inputs' kernel), and the prepare
    # instances on packed partial chunks
    for spec in "racecheck:Chunked/Oracle.MatchesOracle/t65_l2norm:Chunked/F32Inputs.MatchesOracle/t65_l2norm:Forms.PrepareHeadGroupsMatchOneHead:Forms.ChainFormedUMatchesPreparedU" \
                "memcheck:Chunked/Oracle.MatchesOracle/packed_zero_len_pool_inplace:Chunked/Oracle.MatchesOracle/ckpt_pool_packed_inplace:Chunked/F32Inputs.MatchesOracle/packed_zero_len_pool_inplace_kv_raw:Chunked/F32Inputs.MatchesOracle/strided:Device.Invalid*:Forms.FusedTmaMatchesCpAsync:Forms.PackedTailIgnoresNextSequence:Forms.PrepareHeadGroupsMatchOneHead:Forms.ChainFormedUMatchesPreparedU:Forms.SegmentsMatchUnsplit:Forms.WindowsMatchUnwindowed:Forms.OverlappedWindowsFollowTheCallersStream:Forms.BackToBackOverlappedCallsChainTheirStates:Range.*"; do
      tool=${spec%%:*} filter=${spec#*:}
      LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        --print-limit 20 "$BIN/cuda_chunked_test" --gtest_brief=1 "--gtest_filter=$filter" > "$WORK/chunked/$tool-$name.log" 2>&1
      note "chunked $tool ($name): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$WORK/chunked/$tool-$name.log" | tail -n 1) ($(elapsed))"
    done
  done
fi

if has stress; then  # the same-bits tests over many input sets (a rare mismatch's hunt)
  # stress_repeat BUILD_DIR LABEL TEST_BINARY FILTER: the filter's tests STRESS_GTEST_REPEAT times
  stress_repeat() {
    local log=$WORK/chunked/stress-$2.log
    LD_LIBRARY_PATH=$PWD/$1:/usr/local/cuda/lib64 timeout "${STRESS_S:-240}" "$BIN/$3" --gtest_brief=1 \
      "--gtest_repeat=${STRESS_GTEST_REPEAT:-40}" "--gtest_filter=$4" > "$log" 2>&1
    local rc=$?
    note "stress repeats, $2: rc=$rc, $(grep -c '^\[  FAILED  \]' "$log") failure lines ($(elapsed))"
    [ $rc -eq 0 ] || { grep -E 'Failure|seed|FAILED' "$log" | head -30 | tee -a "$SUMMARY"; cp "$log" "$FINAL/"; }
  }
  for d in $(builds "${STRESS_LIBS:-lib}"); do
    name=$(basename "$d")
    LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 GDN_STRESS_REPEATS=${STRESS_REPEATS:-300} timeout "${STRESS_S:-240}" \
      "$BIN/cuda_chunked_test" --gtest_brief=1 --gtest_filter=Forms.SplitCallsAreDeterministic \
      > "$WORK/chunked/stress-$name.log" 2>&1
    note "== stress ($name): rc=$? $(grep -E '^\[ stress \]' "$WORK/chunked/stress-$name.log") ($(elapsed))"
    grep -E 'seed [0-9]+:' "$WORK/chunked/stress-$name.log" | head -30 | tee -a "$SUMMARY"
    # the other tests that hold two forms to the same bits, each on fresh seeds every repeat
    stress_repeat "$d" "chunked-$name" cuda_chunked_test "${STRESS_REPEAT_FILTER:-Forms.BackToBackOverlappedCallsChainTheirStates:Forms.OverlappedWindowsFollowTheCallersStream:Forms.PackedTailIgnoresNextSequence:Forms.ChainFormedUMatchesPreparedU:Forms.FusedTmaMatchesCpAsync:Forms.PrepareHeadGroupsMatchOneHead:Forms.F32SplitMatchesFused}"
    # the recurrent kernel's (its forms, cache hints, early launch, graphs, streams)
    [ -x "$BIN/cuda_device_test" ] && stress_repeat "$d" "decode-$name" cuda_device_test "DecodeForms.*:EarlyLaunch.*:Graph.*:Streams.*"
  done
fi

if has prefill; then  # every form of ours against fla, side by side (bench/bench_prefill.py)
  timeout "$(( ${PREFILL_S:-240} + 60 ))" python3 bench/bench_prefill.py --lib "$PWD/.devbuild/lib/libgdn.so" \
    --out "$FINAL" --forms "${PREFILL_FORMS-fused,split:1}" --rep 30 --deadline "${PREFILL_S:-240}" \
    ${PREFILL_CASES:+--cases "$PREFILL_CASES"} ${PREFILL_ARGS:-} > "$WORK/prefill.log" 2>&1
  note "== prefill benchmark: rc=$? ($(elapsed))"
  sed -n '/^results:/,$p' "$WORK/prefill.log" >> "$SUMMARY"
fi

if has tool; then
  T=$WORK/tool
  "$BIN/gdn" info > "$T/info.log" 2>&1; note "== gdn info: rc=$?"; cat "$T/info.log" >> "$SUMMARY"
  timeout 90 "$BIN/gdn" check --backend cuda > "$T/check.log" 2>&1
  note "gdn check --backend cuda: rc=$? $(tail -n 1 "$T/check.log")"
  grep FAIL "$T/check.log" | head -20 >> "$SUMMARY"
  timeout 60 "$BIN/gdn" demo > "$T/demo.log" 2>&1; note "gdn demo: rc=$?"; cat "$T/demo.log" >> "$SUMMARY"
  timeout 150 "$BIN/gdn" bench --backend cuda --cases decode --repeat 20 --commit "$COMMIT" \
    --json "$T/tool-bench.json" > "$T/bench.log" 2>&1
  note "gdn bench --backend cuda: rc=$?"; cat "$T/bench.log" >> "$SUMMARY"
  timeout 120 "$BIN/gdn" bench --backend cuda --cases prefill-1x4096 prefill-1x32768-hk2hv8 --repeat 5 \
    --commit "$COMMIT" --json "$T/tool-bench-prefill.json" > "$T/bench-prefill.log" 2>&1
  note "gdn bench --backend cuda --cases prefill-...: rc=$?"; cat "$T/bench-prefill.log" >> "$SUMMARY"
  timeout 60 python3 scripts/tool_chunked_check.py --gdn "$BIN/gdn" > "$T/run-chunked.log" 2>&1
  note "gdn run --path chunked vs recurrent: rc=$?"; cat "$T/run-chunked.log" >> "$SUMMARY"
  timeout 90 python3 scripts/oracle_vs_transformers.py --gdn "$BIN/gdn" --json "$FINAL/oracle-vs-transformers.json" \
    > "$T/oracle.log" 2>&1
  note "oracle vs transformers: rc=$? ($(elapsed))"; cat "$T/oracle.log" >> "$SUMMARY"
fi

if has python; then
  P=$WORK/python
  wait "$PYBUILD"
  note "== python build: rc=$(cat "$P/build.rc" 2>/dev/null || echo '?') ($(elapsed))"
  tail -n 20 "$P/build.log" >> "$SUMMARY"
  export PYTHONPATH=/tmp/gdn-py:/tmp/site
  IFS=';' read -ra CHECKS <<< "${PYTHON_CHECKS:-bench/bench_binding_overhead.py;scripts/hf_layer_check.py --tokens 64;scripts/python_gpu_check.py}"
  for s in "${CHECKS[@]}"; do
    log=$P/$(basename "${s%% *}" .py).log
    timeout "${PYTHON_CHECK_S:-300}" python3 $s > "$log" 2>&1
    note "$s: rc=$? ($(elapsed))"
    tail -n 40 "$log" >> "$SUMMARY"
  done
fi

if has compare; then  # the packed build (lib) and every --add-lib build, alternating, no peer
  C=${COMPARE_CASES:-prefill-4x8192,prefill-16x4096,prefill-varlen16,prefill-1x32768-hv64,prefill-1x65536}
  note "== compare ($C)"
  IFS=';' read -ra compare_envs <<< "${COMPARE_ENVS:-}"
  [ ${#compare_envs[@]} -eq 0 ] && compare_envs=("")
  for r in $(seq "${COMPARE_REPEATS:-2}"); do
    for d in $(builds "${COMPARE_LIBS:-}"); do
      for setting in "${compare_envs[@]}"; do
        name=$(basename "$d")${setting:+-${setting// /-}}
        env $setting LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 timeout 300 python3 bench/bench_prefill.py \
          --lib "$PWD/$d/libgdn.so" --out "$WORK/compare/$name-$r" --cases "$C" --no-peer --rep 30 --commit "$name" \
          ${COMPARE_ARGS:-} > "$WORK/compare/$name-$r.log" 2>&1
        grep -E '^prefill-' "$WORK/compare/$name-$r.log" | sed "s/^/$name r$r /" >> "$SUMMARY"
      done
    done
  done
  note "compare done ($(elapsed))"
fi

if has boundary; then  # the form model's boundary (scripts/form_boundary.sh)
  note "== form boundary (gdn bench, ms: case, form, time)"
  GDN=$BIN/gdn bash scripts/form_boundary.sh > "$WORK/boundary.log" 2>&1
  cat "$WORK/boundary.log" >> "$SUMMARY"
  note "boundary done ($(elapsed))"
fi

if has sweep; then  # each case under each setting (scripts/settings_sweep.sh)
  note "== settings sweep (gdn bench, ms: case, setting, time)"
  GDN=$BIN/gdn bash scripts/settings_sweep.sh > "$WORK/sweep.log" 2>&1
  cat "$WORK/sweep.log" >> "$SUMMARY"
  note "sweep done ($(elapsed))"
fi

if has decode; then  # the packed build (lib) and every --add-lib build, alternating, the peer beside each
  C=${DECODE_CASES:-'^decode-B(1|16|64|256|1024)-vk$|^decode-B256-vk-serving$'}
  note "== decode compare ($C)"
  mkdir -p "$WORK/decode"
  for r in $(seq "${DECODE_REPEATS:-2}"); do
    for d in $(builds "${DECODE_LIBS:-}"); do
      name=$(basename "$d")
      LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 timeout 300 python3 bench/bench_decode.py --lib "$PWD/$d/libgdn.so" \
        --out "$WORK/decode" --cases "$C" "--tag=-$name-$r" --commit "$name" > "$WORK/decode/$name-$r.log" 2>&1
      grep -E '^decode-' "$WORK/decode/$name-$r.log" | sed "s/^/$name r$r /" >> "$SUMMARY"
    done
  done
  note "decode compare done ($(elapsed))"
fi

# a lab's run (its output into the summary): run_lab LOG TITLE SECONDS COMMAND...
run_lab() {
  local log=$WORK/lab/$1.log title=$2 seconds=$3
  shift 3
  timeout "$seconds" "$@" > "$log" 2>&1
  note "== $title: rc=$? ($(elapsed))"
  cat "$log" >> "$SUMMARY"
}
has lab && run_lab lab "decode lab" 150 "$BIN/gdn_decode_lab"
has wgmma && run_lab wgmma "wgmma lab" 60 "$BIN/gdn_wgmma_lab"
has wgmmarate && run_lab wgmmarate "wgmma rate lab" 60 "$BIN/gdn_wgmma_rate_lab"
has chainlab && run_lab chain "chain lab" 60 "$BIN/gdn_chain_lab"
has aheadlab && run_lab ahead "chain look-ahead lab" 60 "$BIN/gdn_chain_ahead_lab"
if has hostcost; then  # each build in HOSTCOST_LIBS (default the packed one), alternating, HOSTCOST_REPEATS times
  for r in $(seq 1 "${HOSTCOST_REPEATS:-1}"); do
    for d in $(builds "${HOSTCOST_LIBS:-lib}"); do
      name=$(basename "$d")
      LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 run_lab "host-cost-$name-$r" "host cost lab ($name, repeat $r)" 120 \
        "$BIN/gdn_host_cost_lab" --json "$FINAL/host-cost-$name-$r.json"
    done
  done
fi
has coresidence && run_lab coresidence "coresidence lab" 60 "$BIN/gdn_coresidence_lab"

if has kernels; then  # each chunked kernel's duration (Nsight Compute, one launch at a time)
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  mkdir -p "$WORK/kernels"
  IFS=';' read -ra settings <<< "${KERNELS_ENVS:-GDN_CHUNKED_FORM=split2 GDN_CHUNKED_WINDOWS=0}"
  for d in $(builds "${KERNELS_LIBS:-lib}"); do
    name=$(basename "$d")
    for i in "${!settings[@]}"; do
      log="$WORK/kernels/$name-$i.log"
      case_run=(python3 bench/bench_prefill.py --lib "$PWD/$d/libgdn.so" --out /tmp/ncu-kernels
                --cases "${KERNELS_CASE:-prefill-1x16384}" --no-peer --rep 1 ${KERNELS_ARGS:-})
      # (a case string "N=...": the tool's generated case, its gates by decay=, on this build)
      [[ ${KERNELS_CASE:-} == N=* ]] &&
        case_run=("$BIN/gdn" bench --backend cuda --no-accuracy --repeat 2 --cases "$KERNELS_CASE")
      LD_LIBRARY_PATH=$PWD/$d:/usr/local/cuda/lib64 env ${settings[$i]} timeout 150 "$NCU" --clock-control none \
        -k "regex:${KERNELS_REGEX:-chunk|segment}" --launch-count "${KERNELS_COUNT:-6}" \
        --metrics "${KERNELS_METRICS:-gpu__time_duration.sum}" --csv "${case_run[@]}" > "$log" 2>&1
      note "== kernels ($name: ${settings[$i]}, ${KERNELS_CASE:-prefill-1x16384}): rc=$?"
      grep -E '"(gpu|dram|lts|sm|l1tex)__' "$log" | awk -F'","' '{print $5, $(NF-2), $(NF)}' | sed 's/"//g; s/(.*)//' >> "$SUMMARY"
    done
  done
fi

if has trace; then
  for TL in $(builds "${TRACE_LIB:-trace}"); do
    for keys in ${TRACE_KEYS:-spec}; do
      tn=$(basename "$TL")$([ "$keys" = spec ] || echo "-$keys")
      LD_LIBRARY_PATH=$PWD/$TL:/usr/local/cuda/lib64 timeout 120 python3 bench/ws_trace.py --lib "$PWD/$TL/libgdn.so" \
        --case "${TRACE_CASE:-prefill-4x8192}" --keys "$keys" --json "$FINAL/ws-trace-$tn.json" \
        --raw "$FINAL/ws-trace-$tn.npy" > "$WORK/trace-$tn.log" 2>&1
      note "== trace $tn: rc=$? ($(elapsed))"
      cat "$WORK/trace-$tn.log" >> "$SUMMARY"
    done
  done
fi

if has profile; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  P=$WORK/profile
  PL=$(builds "${PROFILE_LIB:-lib}")
  LD_LIBRARY_PATH=$PWD/$PL:/usr/local/cuda/lib64 GDN_CHUNKED_FORM=${PROFILE_FORM:-} timeout 200 "$NCU" --clock-control none \
    -k "regex:${NCU_KERNEL:-chunk_chain_kernel}" --launch-skip 1 --launch-count 1 --set full --import-source no -f -o /tmp/prof \
    python3 bench/bench_prefill.py --lib "$PWD/$PL/libgdn.so" --out /tmp/ncu-bench \
    --cases "${PROFILE_CASE:-prefill-1x4096}" --no-peer --rep 5 ${PROFILE_ARGS:-} > "$P/ncu.log" 2>&1
  note "== profile: rc=$? ($(elapsed))"
  "$NCU" --import /tmp/prof.ncu-rep --page details > "$P/details.txt" 2>> "$P/ncu.log"
  "$NCU" --import /tmp/prof.ncu-rep --page source --csv --print-source sass > "$P/source.csv" 2>> "$P/ncu.log"
  grep -E "Duration|Registers|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Tensor|Shared" \
    "$P/details.txt" | head -20 >> "$SUMMARY"
  python3 scripts/ncu_regions.py "$P/source.csv" >> "$SUMMARY" 2>&1  # stall samples by stretch
  python3 scripts/ncu_regions.py --roles "$P/source.csv" >> "$SUMMARY" 2>&1  # by role, waits by barrier
fi

if has labprofile; then  # Nsight Compute on one launch of the chain lab's kernel LABPROFILE_KERNEL
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  P=$WORK/labprofile
  mkdir -p "$P"
  timeout 200 "$NCU" --clock-control none -k "regex:${LABPROFILE_KERNEL:-chain_today}" --launch-skip 1 --launch-count 1 \
    --set full --import-source no -f -o /tmp/labprof "$BIN/gdn_chain_ahead_lab" > "$P/ncu.log" 2>&1
  note "== lab profile (${LABPROFILE_KERNEL:-chain_today}): rc=$? ($(elapsed))"
  "$NCU" --import /tmp/labprof.ncu-rep --page details > "$P/details.txt" 2>> "$P/ncu.log"
  "$NCU" --import /tmp/labprof.ncu-rep --page source --csv --print-source sass > "$P/source.csv" 2>> "$P/ncu.log"
  grep -E "Duration|Registers|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Tensor|Shared|Eligible|Active Warps" \
    "$P/details.txt" | head -24 >> "$SUMMARY"
  python3 scripts/ncu_regions.py "$P/source.csv" >> "$SUMMARY" 2>&1
  python3 scripts/ncu_regions.py --top 40 "$P/source.csv" >> "$SUMMARY" 2>&1
fi

tar czf "$FINAL/logs.tgz" -C "$WORK" . 2>/dev/null
if [ -d /tmp/triton-cache ]; then  # back for the next pass: parts within a returned file's 16 MiB
  tar czf /tmp/triton-cache.tgz -C /tmp/triton-cache . 2>/dev/null
  size=$(stat -c %s /tmp/triton-cache.tgz 2>/dev/null || echo 0)
  if [ "$size" -gt 0 ] && [ "$size" -le $((45 * 1024 * 1024)) ]; then
    split -b 15m -d -a 1 /tmp/triton-cache.tgz "$FINAL/triton-cache.tgz.part" \
      && note "triton cache returned ($((size / 1024)) KiB in $(ls "$FINAL"/triton-cache.tgz.part* | wc -l) parts): copy them to .devcache/"
  else
    note "triton cache not returned ($((size / 1024)) KiB)"
  fi
fi
note "pass done ($(elapsed))"
