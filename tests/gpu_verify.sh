#!/bin/sh
# Verifies a representative set of variants on the GPU through the command;
# "skipped" (status 77) on a machine without one.
#   gpu_verify.sh path/to/flashtune
ft=$1
if ! "$ft" devices --gpu >/dev/null 2>&1; then
  echo "skipped: no GPU ($("$ft" devices --gpu 2>&1 | head -n 1))"
  exit 77
fi
exec "$ft" verify specs/flash_fwd.lua -q --only "${FT_VERIFY_ONLY:-bm=128,bn=64,stages=2}"
