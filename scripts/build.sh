#!/bin/sh
# Configures and builds flashtune into build/ (extra arguments go to cmake's configure step).
set -eu
cd "$(dirname "$0")/.."
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -d "$cuda/bin" ] && PATH="$cuda/bin:$PATH"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_WERROR=ON "$@" >/dev/null
cmake --build build
