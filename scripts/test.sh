#!/bin/sh
# Installs what is missing, builds, and runs the whole test suite through ctest. GPU tests
# report "skipped" on a machine without a GPU. FT_TEST_LABELS='-LE slow' leaves out the
# full-space compile tests (about 38 minutes on two cores).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
sh scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086
ctest --test-dir build --output-on-failure -j "$jobs" ${FT_TEST_LABELS:-}
