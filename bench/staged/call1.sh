#!/bin/bash
# Call 1 of the next GPU session (staged 2026-12-08; no GPU was lent that day). Carry .dev/run_b0,
# .dev/run_b5, .dev/run_b6, .dev/run_b7, .dev/run_b8 and .dev/run_hold (restaged from HEAD); FA4's
# parts come in calls 2 and 3 (64 MiB a call). The pack bisection and the GPU tests (diag4.sh),
# then on an H200 the full forward tune (issue 19's figure; its database /tmp/ft-full.db stays
# for call 3), then tests/gpu_verify.sh. LIMIT: the seconds the call may take (default 560).
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-560}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
LIMIT=280 bash bench/results/h100-2026-12-07-pack2/scripts/diag4.sh > /dev/null 2>&1
el=$(( $(date +%s) - t0 ))
if echo "$name" | grep -q H200 && [ $((LIMIT - el)) -gt 150 ]; then
  RUN=/tmp/run_hold TUNE_SPECS="specs/flash_fwd.lua specs/flash_fwd_sm90.lua" FULLTUNE_LIMIT=$((LIMIT - el - 70)) \
    bash bench/device_hd8.sh fulltune > /dev/null 2>&1
fi
el=$(( $(date +%s) - t0 ))
if [ $el -lt $((LIMIT - 40)) ]; then
  t1=$(date +%s)
  LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/run_hold:/tmp/run_hold/deps FLASHTUNE_CACHE_DIR=/tmp/ft-cache \
    timeout $((LIMIT - el)) sh tests/gpu_verify.sh /tmp/run_hold/flashtune > "$OUT/gpu_verify.txt" 2>&1
  echo "gpu_verify: exit $? in $(( $(date +%s) - t1 )) s ($(grep -c ' pass ' "$OUT/gpu_verify.txt") pass lines, $(grep -c ' FAIL ' "$OUT/gpu_verify.txt") FAIL)" >> "$OUT/summary.txt"
fi
echo "call 1: $(( $(date +%s) - t0 )) s on $name" >> "$OUT/summary.txt"
cat "$OUT/diag_summary.txt" "$OUT/summary.txt"
