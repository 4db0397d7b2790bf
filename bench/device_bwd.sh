#!/bin/bash
# The backward's kernels through `flashtune verify` on the GPU machine, as it was run (one call):
# the two tile shapes of tests/gpu_verify.sh on the full set of shapes, four more on the quick
# set; each filter takes every causality, dtype, GQA mode and determinism of its tile shape.
#   bash bench/device_bwd.sh
# Expects a build with -DFT_STATIC_DEPS=ON in $RUN (default .dev/run: flashtune and
# deps/liblua5.4.so.0, libsqlite3.so.0, as for bench/device_ops.sh). Logs go to $OUT.
set -u
RUN=${RUN:-.dev/run}
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$RUN:$PWD/$RUN/deps:${LD_LIBRARY_PATH:-}
export FLASHTUNE_CACHE_DIR=/tmp/ft-cache
ft=$RUN/flashtune
summary=$OUT/summary.txt
: > "$summary"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > "$OUT/gpu.txt"
sha256sum templates/flash_bwd_sm80.cuh templates/reference.cuh templates/include/*.cuh > "$OUT/templates.sha256"
i=0
for job in "full d=128,bm=64,bn=128,warps=8,split=1,stages=2" "full d=64,bm=32,bn=128,warps=4,split=1,stages=1" \
           "quick d=256,bm=64,bn=64,warps=8,split=2,stages=1" "quick d=192,bm=64,bn=64,warps=8,split=2,stages=2" \
           "quick d=128,bm=64,bn=64,warps=4,split=1,stages=1" "quick d=96,bm=64,bn=128,warps=8,split=1,stages=2"; do
  set -- $job
  i=$((i + 1))
  t0=$(date +%s)
  timeout "${VERIFY_LIMIT:-100}" "$ft" verify specs/flash_bwd.lua -q --shapes "$1" --only "$2" > "$OUT/verify_$i.txt" 2>&1
  rc=$?
  echo "verify --shapes $1 --only $2: exit $rc in $(( $(date +%s) - t0 )) s: $(tail -n 1 "$OUT/verify_$i.txt")" | tee -a "$summary"
done
grep -h -E ' FAIL ' "$OUT"/verify_*.txt | head -n 20 | tee -a "$summary"
