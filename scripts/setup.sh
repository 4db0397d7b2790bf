#!/bin/sh
# Installs what flashtune needs to build, from Debian packages, where it is missing, and
# checks for the CUDA toolkit (NVRTC and cuda.h), which comes from NVIDIA, not Debian.
set -eu
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v ninja >/dev/null 2>&1 || need="$need ninja-build"
[ -f /usr/include/lua5.4/lua.h ] || need="$need liblua5.4-dev"
[ -f /usr/include/sqlite3.h ] || need="$need libsqlite3-dev"
command -v sqlite3 >/dev/null 2>&1 || need="$need sqlite3"   # the tests inspect databases with it
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"   # the install test builds with it
if [ -n "$need" ]; then
  echo "setup: installing$need"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ] && ! command -v nvcc >/dev/null 2>&1; then
  echo "setup: the CUDA toolkit (with NVRTC) is not in $cuda and nvcc is not on PATH;" >&2
  echo "setup: install it from NVIDIA or set CUDA_HOME" >&2
  exit 1
fi
# The tests read the SASS of generated sm_90a kernels with cuobjdump/nvdisasm, which some
# toolkit installs leave out: take them from NVIDIA's PyPI packages into FT_TOOLS_DIR (the
# tests say so, and leave those checks out, when neither can be had).
tools=${FT_TOOLS_DIR:-$HOME/.cache/flashtune/tools}
if [ ! -x "$cuda/bin/cuobjdump" ] && ! command -v cuobjdump >/dev/null 2>&1 &&
  [ ! -x "$tools/nvidia/cu13/bin/cuobjdump" ]; then
  echo "setup: fetching cuobjdump and nvdisasm into $tools"
  python3 -m pip install --quiet --disable-pip-version-check --timeout 20 --retries 2 --target "$tools" \
    "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14" >/dev/null 2>&1 ||
    echo "setup: could not fetch them; the SASS checks of the tests will be left out" >&2
fi
