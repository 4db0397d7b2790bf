#!/bin/sh
# The main job on a fresh machine: install what is missing, build, then tune the default
# spec on the GPU. Without a GPU, tune says so in one line and runs a compile-only plan
# for $FT_ARCH (default sm_90) instead.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
sh scripts/build.sh
exec ./build/flashtune tune specs/flash_fwd.lua --arch "${FT_ARCH:-sm_90}" "$@"
