#!/bin/sh
# The main job on a fresh machine: install what is missing, build, then tune the built-in
# specs on the GPU (flash_fwd, and flash_fwd_sm90 on compute capability 9.0). Without a GPU,
# tune says so in one line and runs a compile-only plan of flash_fwd for $FT_ARCH (default
# sm_90) instead.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
sh scripts/build.sh
exec ./build/flashtune tune --arch "${FT_ARCH:-sm_90}" "$@"
