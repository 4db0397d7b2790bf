#!/bin/bash
# One call on the GPU machine (what produced bench/results/h200-2026-11-30/): a tune of the
# sm_90a family's d=128/64/256 buckets into a database seeded with an earlier tune of the sm80
# family (SEED_DB, default build-dev/tuning-run4.db; without it, the sm80 family is tuned as
# well), the benchmark report against SDPA and FlexAttention through the tuned dispatch, the
# GPU tests and compute-sanitizer. With two GPUs (kind nvidia-h200-x2) the tests run on the
# second, beside the tune and the report on the first. Everything lands in $OUT/final.tgz
# (the machine returns only a few files), a summary is printed as it goes.
#   LIMIT  seconds for the whole call (default 570)   REPORT_ARGS  extra report.py arguments
set -u
T0=$(date +%s); DEADLINE=$((T0 + ${LIMIT:-570}))
left() { echo $(( DEADLINE - $(date +%s) )); }
lim() { local l; l=$(left); l=$((l - ${2:-10})); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 5 ] && l=5; echo $l; }
BUILD=build-dev
R=$OUT/r; mkdir -p $R
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$BUILD/deps FLASHTUNE_CACHE_DIR=/tmp/ft-cache
export FLASHTUNE_LIB=$PWD/$BUILD/libflashtune.so PYTHONUNBUFFERED=1
ft=$BUILD/flashtune
S=$R/summary.txt; : > $S
note() { echo "$*" | tee -a $S; }
NGPU=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "triton", triton.__version__)' | tee -a $R/gpu.txt

main_block() {
  local t db=$R/tuning.db
  local specs=flash_fwd_sm90 seed=${SEED_DB:-$BUILD/tuning-run4.db}
  if [ -f "$seed" ]; then cp "$seed" $db; else specs="flash_fwd flash_fwd_sm90"; fi
  t=$(date +%s)
  for d in 128 64 256; do
    # shellcheck disable=SC2086
    timeout $(lim 90 $1) $ft tune $specs --only d=$d --db $db --budget 10 -q >> $R/tune.txt 2>&1
    note "tune sm90 d=$d (--budget 10): rc=$? at $(( $(date +%s) - t )) s; $(grep -E '^(measured|time)' $R/tune.txt | tail -n 2 | tr '\n' ' ')"
  done
  $ft query --db $db > $R/winners.txt 2>&1
  $ft query --db $db --all --json > $R/all.jsonl 2>&1
  note "winners: $(grep -c ' winner' $R/winners.txt), sm90: $(grep ' winner' $R/winners.txt | grep -c pingpong=)"
  t=$(date +%s)
  timeout $(lim 300 $2) python3 bench/report.py --out $R/report --flashtune $ft --db $db --tune-log $R/tune.txt \
    ${OVERHEAD_JSON:+--overhead-json "$OVERHEAD_JSON"} --flex --flex-budget 90 --budget $(lim 240 $(( $2 + 60 ))) \
    ${REPORT_ARGS:-} > $R/report.txt 2>&1
  note "report: rc=$? in $(( $(date +%s) - t )) s"
  grep -A 14 '^## Geometric means' $R/report/report.md | tee -a $S
  grep '^- cuDNN is ahead' $R/report/report.md | tee -a $S
}

test_block() {
  local t
  t=$(date +%s)
  timeout $(lim 120 $1) $BUILD/tests/test_gpu > $R/test_gpu.txt 2>&1
  note "test_gpu: rc=$? $(grep -c '^ok' $R/test_gpu.txt) ok, $(grep -c '^FAIL' $R/test_gpu.txt) failed ($(( $(date +%s) - t )) s)"
  t=$(date +%s)
  timeout $(lim 90 $1) sh tests/gpu_tune.sh $ft $BUILD/attention > $R/gpu_tune.txt 2>&1
  note "gpu_tune: rc=$? ($(( $(date +%s) - t )) s)"
  t=$(date +%s)
  timeout $(lim 90 $1) python3 tests/test_python.py > $R/test_python.txt 2>&1
  note "gpu_python: rc=$? $(tail -n 1 $R/test_python.txt) ($(( $(date +%s) - t )) s)"
  for run in "memcheck d=128,bm=128,bn=176,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1 b=1,hq=4,hkv=2,sq=300,sk=257,d=128" \
             "racecheck d=128,bm=128,bn=176,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1 b=1,hq=4,hkv=2,sq=300,sk=257,d=128" \
             "synccheck d=128,bm=128,bn=176,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=0 b=1,hq=4,hkv=2,sq=300,sk=257,d=128" \
             "memcheck d=64,bm=192,bn=96,stages=3,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0 b=2,hq=40,hkv=8,sq=300,sk=257,d=64" \
             "racecheck d=64,bm=192,bn=96,stages=3,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0 b=2,hq=40,hkv=8,sq=300,sk=257,d=64"; do
    set -- $run
    [ $(left) -lt 25 ] && { note "sanitizer $1 $2: not run (time)"; continue; }
    timeout $(lim 60 15) compute-sanitizer --tool $1 --error-exitcode 9 $ft run --spec flash_fwd_sm90 --no-time \
      --variant $2 --shape $3 >> $R/sanitizer.txt 2>&1
    note "sanitizer $1 $2 $3: rc=$?"
  done
  if [ $(left) -gt 30 ]; then
    timeout $(lim 60 10) sh tests/pack.sh $ft $BUILD/tests/fake_worker cc $BUILD/libflashtune.so > $R/pack.txt 2>&1
    note "pack_cli with GPU: rc=$? $(tail -n 1 $R/pack.txt)"
  fi
}

if [ "$NGPU" -ge 2 ]; then
  (export CUDA_VISIBLE_DEVICES=1 FLASHTUNE_CACHE_DIR=/tmp/ft-cache-1; test_block 10) &
  (export CUDA_VISIBLE_DEVICES=0; main_block 220 15)
  wait
else
  main_block 330 200
  test_block 10
fi
tar czf $OUT/final.tgz -C $OUT r
note "total $(( $(date +%s) - T0 )) s, $NGPU GPUs"
