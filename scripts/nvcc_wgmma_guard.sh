#!/usr/bin/env bash
# The CUDA compiler launcher of the library's kernels (src/cuda/CMakeLists.txt): runs the compile
# with ptxas's information output and fails it when ptxas reports a wgmma pipeline it serialised
# or had to wait inside (its C75xx infos, printed only with -v: measured, one such build of the
# fused kernel was 22% slower with nothing else to show for it). Other output passes through;
# the resource lines too when GDN_CUDA_PTXAS_VERBOSE is on (-Xptxas=-v already in the command).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" -Xptxas=-v 2> "$log"
rc=$?
verbose=0
for arg in "$@"; do [ "$arg" = "-Xptxas=-v" ] && verbose=1; done
if [ $verbose = 1 ]; then cat "$log" >&2; else grep -v -E '^ptxas info +: ([0-9]+ bytes gmem|Compiling entry|Function properties|Used [0-9]+ registers|Compile time)|^ +[0-9]+ bytes stack frame' "$log" >&2; fi
if [ $rc = 0 ] && grep -q -E '\(C75[0-9][0-9]\)' "$log"; then
  echo "error: ptxas serialised or waited inside a wgmma pipeline (above); see scripts/nvcc_wgmma_guard.sh" >&2
  grep -E '\(C75[0-9][0-9]\)' "$log" >&2
  exit 1
fi
exit $rc
