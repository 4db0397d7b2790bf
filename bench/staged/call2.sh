#!/bin/bash
# Call 2 of the next GPU session (bench/staged/README.md): FA4 part 1 stashed; test_gpu's forward cases on /tmp/run_hold (call 1's copy)
set -u
t0=$(date +%s)
bash bench/fa4_install.sh stash .dev/fa4x1 > $OUT/fa4_stash1.txt 2>&1
echo "stash1: $(tail -1 $OUT/fa4_stash1.txt) $(nvidia-smi --query-gpu=name --format=csv,noheader)" > $OUT/summary.txt
[ -d /tmp/run_hold ] || { mkdir -p /tmp/run_hold && cp -a .dev/run_hold/. /tmp/run_hold/ 2>/dev/null; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/run_hold:/tmp/run_hold/deps FLASHTUNE_CACHE_DIR=/tmp/ft-cache
t1=$(date +%s); timeout 250 /tmp/run_hold/tests/test_gpu reference forward decode head_dims kv_ varlen bad_arguments > $OUT/test_gpu_fwd.txt 2>&1
echo "test_gpu (fwd part): exit $? in $(( $(date +%s)-t1 )) s ($(grep -c '^ok' $OUT/test_gpu_fwd.txt) ok, $(grep -c '^FAIL' $OUT/test_gpu_fwd.txt) FAIL)" >> $OUT/summary.txt
echo "total $(( $(date +%s)-t0 )) s" >> $OUT/summary.txt
cat $OUT/summary.txt
