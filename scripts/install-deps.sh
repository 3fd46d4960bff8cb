#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages gdn builds with, when any is missing (idempotent; quiet when
# everything is there). nvcc is optional: without it the CUDA backend is left out. Extra package
# names (the portability checks' compilers) are installed the same way.
#   scripts/install-deps.sh [PACKAGE ...]
set -euo pipefail
need=()
for pkg in cmake g++ make libgtest-dev libcli11-dev nlohmann-json3-dev python3-venv "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}"
