#!/bin/sh
# Copies what the GPU machine's scripts (bench/device_*.sh) run from a build made with
# -DFT_STATIC_DEPS=ON into one folder (default .dev/run), for the device call's `carry`:
# flashtune, libflashtune.so*, attention, tests/test_gpu, tests/fake_worker, and in deps/ the
# Lua and SQLite libraries the shared library links (the GPU machine has neither), and COMMIT:
# the checkout's commit, "+ changes" when it differs from it (bench/device_common.sh records it).
#   sh bench/stage_run.sh [BUILD] [RUN]       (defaults .dev/build, .dev/run)
set -eu
build=${1:-.dev/build}
run=${2:-.dev/run}
rm -rf "$run"
mkdir -p "$run/tests" "$run/deps"
cp -P "$build"/flashtune "$build"/attention "$build"/libflashtune.so* "$run"/
cp "$build"/tests/test_gpu "$build"/tests/fake_worker "$run"/tests/
for lib in $(ldd "$build/libflashtune.so" | awk '/liblua|libsqlite/ {print $3}'); do
  cp -L "$lib" "$run/deps/"
done
{ git rev-parse HEAD 2>/dev/null || echo unknown; git diff --quiet HEAD 2>/dev/null || echo "+ changes"; } > "$run/COMMIT"
du -sh "$run"
