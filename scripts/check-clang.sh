#!/usr/bin/env bash
# The library built with Clang (16: Debian's clang-16 and libomp-16-dev, installed when missing),
# without the CUDA backend and the tool, and its tests (the CPU ones on every SIMD target this
# machine has). CI runs it so that the README's word on Clang stays true.
#   scripts/check-clang.sh              # build in build-clang/ (CLANG_BUILD=dir to change)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${CLANG_BUILD:-build-clang}
scripts/install-deps.sh clang-16 libomp-16-dev
CC=clang-16 CXX=clang++-16 cmake -S . -B "$W" -DCMAKE_BUILD_TYPE=Release -DGDN_CUDA=OFF \
  -DGDN_BUILD_TOOL=OFF -DGDN_BUILD_PYTHON=OFF > /dev/null
cmake --build "$W" -j2
(cd "$W" && ctest -j2 --output-on-failure)
