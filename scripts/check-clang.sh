#!/usr/bin/env bash
# The library built with Clang (16: Debian's clang-16 and libomp-16-dev, installed when missing),
# without the CUDA backend and the tool, and its tests (the CPU ones on every SIMD target this
# machine has). CI runs it so that the README's "Clang 15 or newer" stays true.
#   scripts/check-clang.sh              # build in build-clang/ (CLANG_BUILD=dir to change)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${CLANG_BUILD:-build-clang}
need=()
for pkg in clang-16 libomp-16-dev libgtest-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need[@]}"
fi
CC=clang-16 CXX=clang++-16 cmake -S . -B "$W" -DCMAKE_BUILD_TYPE=Release -DGDN_CUDA=OFF \
  -DGDN_BUILD_TOOL=OFF -DGDN_BUILD_PYTHON=OFF > /dev/null
cmake --build "$W" -j2
(cd "$W" && ctest -j2 --output-on-failure)
