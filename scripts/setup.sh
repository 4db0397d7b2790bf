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
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
updated=0
apt_install() { # apt_install PACKAGE...: apt-get install, after one apt-get update
  if [ $updated -eq 0 ]; then
    $sudo apt-get update -qq || return 1
    updated=1
  fi
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
if [ -n "$need" ]; then
  echo "setup: installing$need"
  # shellcheck disable=SC2086
  apt_install $need
fi
# Fuzzing (scripts/fuzz.sh) needs clang and its libFuzzer runtime (libclang-rt-VERSION-dev);
# without them the fuzz step says "skipped", so failing to install them does not stop setup.
fuzzer_runtime() {
  dir=$(clang -print-resource-dir 2>/dev/null) || return 1
  ls "$dir"/lib/*/libclang_rt.fuzzer*.a >/dev/null 2>&1
}
if ! command -v clang >/dev/null 2>&1 || ! fuzzer_runtime; then
  echo "setup: installing clang and its libFuzzer runtime (for scripts/fuzz.sh)"
  { command -v clang >/dev/null 2>&1 || apt_install clang; } &&
    apt_install "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev" ||
    echo "setup: could not install them; the fuzz step will be skipped" >&2
fi
# The pip install test (tests/pip_wheel.sh) makes a virtual environment, which takes
# python3-venv on Debian; without it that test says "skipped".
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  echo "setup: installing python3-venv (for tests/pip_wheel.sh)"
  apt_install python3-venv || echo "setup: could not install it; the pip install test will be skipped" >&2
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
