#!/usr/bin/env bash
# The CPU backend on aarch64 (its NEON target): the library, the harness and the core,
# reference and CPU tests cross-built with GCC and run under qemu. CI runs it so that ARM keeps
# building and passing; it runs on any x86-64 Debian or Ubuntu machine (it installs the cross
# compiler and qemu when they are missing). About 1.5 minutes on 2 cores, most of it the CPU tests
# under emulation.
#   scripts/check-aarch64.sh            # build in build-aarch64/ (ARM_BUILD=dir to change)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${ARM_BUILD:-build-aarch64}

scripts/install-deps.sh g++-aarch64-linux-gnu qemu-user

mkdir -p "$W"
W=$(cd "$W" && pwd)
cat > "$W/toolchain.cmake" <<TOOLCHAIN
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu $W/gtest-install)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
TOOLCHAIN

# GoogleTest for aarch64, from the sources the Debian package ships
if [ ! -f "$W/gtest-install/lib/cmake/GTest/GTestConfig.cmake" ]; then
  cmake -S /usr/src/googletest -B "$W/gtest-build" -DCMAKE_TOOLCHAIN_FILE="$W/toolchain.cmake" \
    -DCMAKE_INSTALL_PREFIX="$W/gtest-install" -DCMAKE_BUILD_TYPE=Release > "$W/gtest.log"
  cmake --build "$W/gtest-build" -j2 >> "$W/gtest.log"
  cmake --install "$W/gtest-build" >> "$W/gtest.log"
fi

cmake -S . -B "$W/gdn" -DCMAKE_TOOLCHAIN_FILE="$W/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DGDN_CUDA=OFF -DGDN_BUILD_TOOL=OFF -DGDN_BUILD_PYTHON=OFF \
  -DGTest_DIR="$W/gtest-install/lib/cmake/GTest" > "$W/configure.log"
cmake --build "$W/gdn" -j2
(cd "$W/gdn" && ctest -j2 --output-on-failure)
