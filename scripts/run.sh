#!/bin/sh
# The main job on a fresh machine: install what is missing, build, then tune the default
# spec on the GPU; without a GPU, say so and run a compile-only plan for sm_90 instead.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
sh scripts/build.sh
if ./build/flashtune devices >/dev/null 2>&1; then
  exec ./build/flashtune tune specs/flash_fwd.lua "$@"
fi
echo "run: no GPU found; running a compile-only plan for ${FT_ARCH:-sm_90} instead"
exec ./build/flashtune plan specs/flash_fwd.lua --arch "${FT_ARCH:-sm_90}" "$@"
