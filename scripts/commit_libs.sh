#!/usr/bin/env bash
# libgdn.so of each given commit, for same-run comparisons on the device (device_pass.sh phases
# compare, kernels, chunked with CHUNKED_LIBS): each commit is built once, in a worktree of its
# own with the project's default CUDA targets (sm_90a and the portable PTX, Release), only the
# library target, and kept as .devlibs/<short sha>.so (ignored); a later call reuses it. A failed
# build leaves no worktree behind.
#   bash scripts/commit_libs.sh main next/co-resident~2 next/co-resident   # prints NAME FILE lines
#   bash scripts/device_pass.sh --pack --slim
#   bash scripts/commit_libs.sh A B | while read -r name file; do
#     bash scripts/device_pass.sh --add-lib "$name" "$file"; done
# NAME is the short sha. Two cores take about a minute a commit (the library target alone).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 COMMIT..." >&2; exit 2; }
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p .devlibs
for ref in "$@"; do
  sha=$(git rev-parse --short "$ref^{commit}")
  lib=.devlibs/$sha.so
  if [ ! -f "$lib" ]; then
    tree=$(mktemp -d)
    trap 'git worktree remove --force "$tree/src" 2>/dev/null; rm -rf "$tree"' EXIT
    git worktree add --quiet --detach "$tree/src" "$sha"
    cmake -S "$tree/src" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release -DGDN_CUDA=ON -DGDN_BUILD_TESTS=OFF \
      -DGDN_BUILD_TOOL=OFF -DGDN_BUILD_PYTHON=OFF > "$tree/configure.log" 2>&1 ||
      { cat "$tree/configure.log" >&2; exit 1; }
    cmake --build "$tree/build" -j "$(nproc)" --target gdn > "$tree/build.log" 2>&1 ||
      { tail -n 30 "$tree/build.log" >&2; exit 1; }
    cp -L "$tree/build/lib/libgdn.so" "$lib"
    git worktree remove --force "$tree/src"
    rm -rf "$tree"
    trap - EXIT
  fi
  echo "$sha $PWD/$lib"
done
