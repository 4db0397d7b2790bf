#!/bin/sh
# Configures and builds flashtune into build/, or $FT_BUILD_DIR (extra arguments go to cmake's
# configure step: FT_BUILD_DIR=build-asan sh scripts/build.sh -DFT_SANITIZE=ON).
set -eu
cd "$(dirname "$0")/.."
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -d "$cuda/bin" ] && PATH="$cuda/bin:$PATH"
dir=${FT_BUILD_DIR:-build}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_WERROR=ON "$@" >/dev/null
cmake --build "$dir"
