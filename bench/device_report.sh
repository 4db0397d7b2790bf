#!/bin/bash
# The GPU machine's side of bench/results/: a tune, the benchmark report against SDPA and
# FlexAttention through the tuned dispatch, the GPU tests and compute-sanitizer. One call of
# the machine allows 10 minutes and a tune plus a report with FlexAttention take longer, so the
# work comes in two phases, each one call:
#
#   bash bench/device_report.sh tune     # tune sm90 d=128/64/256 into a database seeded with
#                                        # an earlier sm80 tune (SEED_DB); GPU tests, verify of
#                                        # every variant and compute-sanitizer on a second GPU
#                                        # beside it
#   DB=path/tuning.db TUNE_LOG=path/tune.txt bash bench/device_report.sh report
#                                        # the report; with two GPUs f16 on one and bf16 on
#                                        # the other, started together, merged into one
#
# The tune phase leaves $OUT/tuning.db and $OUT/tune.txt (carry them to the report phase,
# e.g. in an ignored folder of the checkout). Everything else lands in $OUT/final.tgz (the
# machine returns only a few files); a summary is printed as it goes.
#   LIMIT  seconds for the whole call (default 570)    SEED_DB  default build-dev/tuning-run4.db
#   REPORT_ARGS  extra report.py arguments              BUILD  default build-dev
set -u
PHASE=${1:-}
case "$PHASE" in
  tune|report) ;;
  *) echo "usage: bash bench/device_report.sh tune|report (see the top of the script)" >&2; exit 2 ;;
esac
T0=$(date +%s); DEADLINE=$((T0 + ${LIMIT:-570}))
left() { echo $(( DEADLINE - $(date +%s) )); }
lim() { local l; l="$(left)"; l=$((l - ${2:-10})); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 5 ] && l=5; echo $l; }
BUILD=${BUILD:-build-dev}
OUT=${OUT:-/tmp/ft-out}
R=$OUT/r; mkdir -p $R
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$BUILD/deps
export FLASHTUNE_LIB=$PWD/$BUILD/libflashtune.so PYTHONUNBUFFERED=1
ft=$BUILD/flashtune
S=$R/summary.txt; : > $S
note() { echo "$*" | tee -a $S; }
NGPU=$(nvidia-smi -L | wc -l)
date -u | tee -a $S; sha256sum templates/*.cuh | tee -a $S
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "triton", triton.__version__)' | tee -a $R/gpu.txt

# ---- tune phase ------------------------------------------------------------------------------
tune_block() {
  export CUDA_VISIBLE_DEVICES=0 FLASHTUNE_CACHE_DIR=/tmp/ft-cache-0
  local t db=$R/tuning.db specs=flash_fwd_sm90 seed=${SEED_DB:-$BUILD/tuning-run4.db}
  if [ -f "$seed" ]; then cp "$seed" $db; else specs="flash_fwd flash_fwd_sm90"; fi
  t=$(date +%s)
  for dl in 128:150 64:170 256:60; do
    # shellcheck disable=SC2086
    timeout "$(lim ${dl#*:} 60)" $ft tune $specs --only d=${dl%:*} --db $db --budget 10 -q >> $R/tune.txt 2>&1
    note "tune d=${dl%:*} (--budget 10): rc=$? at $(( $(date +%s) - t )) s; $(grep -E '^(measured|time)' $R/tune.txt | tail -n 2 | tr '\n' ' ')"
  done
  $ft query --db $db > $R/winners.txt 2>&1
  $ft query --db $db --all --json > $R/all.jsonl 2>&1
  note "winners: $(grep -c ' winner' $R/winners.txt), sm90: $(grep ' winner' $R/winners.txt | grep -c pingpong=)"
  cp $db $OUT/tuning.db
  cp $R/tune.txt $OUT/tune.txt
}

test_block() {
  [ "$NGPU" -ge 2 ] && export CUDA_VISIBLE_DEVICES=1
  export FLASHTUNE_CACHE_DIR=/tmp/ft-cache-1
  local t
  t=$(date +%s)
  timeout "$(lim 240 150)" $ft verify flash_fwd_sm90 -q > $R/verify.txt 2>&1
  note "verify sm90 (every variant): rc=$? $(tail -n 1 $R/verify.txt) ($(( $(date +%s) - t )) s)"
  note "variants rejected for spills: $(grep -c ' spills ' $R/verify.txt)"
  for run in "memcheck d=128,bm=128,bn=128,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1 b=1,hq=4,hkv=2,sq=1000,sk=1001,d=128" \
             "racecheck d=128,bm=128,bn=128,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1 b=1,hq=4,hkv=2,sq=1000,sk=1001,d=128" \
             "synccheck d=128,bm=128,bn=128,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1 b=1,hq=4,hkv=2,sq=1000,sk=1001,d=128" \
             "memcheck d=256,bm=128,bn=80,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1 b=2,hq=3,hkv=1,sq=300,sk=100,d=256" \
             "racecheck d=256,bm=128,bn=80,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1 b=2,hq=3,hkv=1,sq=300,sk=100,d=256" \
             "racecheck d=64,bm=192,bn=96,stages=3,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1 b=2,hq=40,hkv=8,sq=300,sk=257,d=64"; do
    set -- $run
    [ "$(left)" -lt 60 ] && { note "sanitizer $1 $2: not run (time)"; continue; }
    timeout 45 compute-sanitizer --tool $1 --error-exitcode 9 $ft run --spec flash_fwd_sm90 --no-time \
      --variant $2 --shape $3 >> $R/sanitizer.txt 2>&1
    note "sanitizer $1 $2 $3: rc=$?"
  done
  timeout "$(lim 60 10)" $BUILD/tests/test_gpu > $R/test_gpu.txt 2>&1
  note "test_gpu: rc=$? $(grep -c '^ok' $R/test_gpu.txt) ok, $(grep -c '^FAIL' $R/test_gpu.txt) failed"
  timeout "$(lim 60 10)" python3 tests/test_python.py > $R/test_python.txt 2>&1
  note "gpu_python: rc=$? $(tail -n 1 $R/test_python.txt)"
  timeout "$(lim 60 10)" sh tests/gpu_tune.sh $ft $BUILD/attention > $R/gpu_tune.txt 2>&1
  note "gpu_tune: rc=$? $(tail -n 1 $R/gpu_tune.txt)"
  timeout "$(lim 60 10)" sh tests/pack.sh $ft $BUILD/tests/fake_worker cc $BUILD/libflashtune.so > $R/pack.txt 2>&1
  note "pack_cli with GPU: rc=$? $(tail -n 1 $R/pack.txt)"
}

# ---- report phase ----------------------------------------------------------------------------
report_part() { # dtypes gpu
  local out=$R/report-${1//,/-}
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$2 FLASHTUNE_CACHE_DIR=/tmp/ft-cache-$2 timeout "$(lim 560 10)" python3 bench/report.py \
    --out $out --flashtune $ft --db "$DB" ${TUNE_LOG:+--tune-log "$TUNE_LOG"} \
    ${OVERHEAD_JSON:+--overhead-json "$OVERHEAD_JSON"} --dtypes $1 --systems flashtune,fa2,cudnn,flex \
    --flex --flex-budget "$(lim 440 130)" --rep-ms 200 --rounds 3 --budget "$(lim 510 60)" --no-plots \
    ${REPORT_ARGS:-} > $out.txt 2>&1
  note "report $1 on GPU $2: rc=$? at $(( $(date +%s) - T0 )) s"
}

if [ "$PHASE" = tune ]; then
  if [ "$NGPU" -ge 2 ]; then
    test_block &
    tune_block
    wait
  else
    tune_block
    test_block
  fi
else
  [ -f "${DB:-}" ] || { note "report: DB=path/to/tuning.db is required (the tune phase's \$OUT/tuning.db)"; exit 2; }
  if [ "$NGPU" -ge 2 ]; then
    report_part bf16 1 &
    report_part f16 0
    wait
    python3 bench/report.py --from-json $R/report-f16/report.json --from-json $R/report-bf16/report.json \
      --out $R/report > $R/merge.txt 2>&1
    note "merged: rc=$? $(tail -n 1 $R/merge.txt)"
  else
    report_part f16,bf16 0
    mv $R/report-f16-bf16 $R/report
  fi
  grep -A 16 '^## Geometric means' $R/report/report.md | tee -a $S
  grep '^- cuDNN is ahead\|^- Flex is ahead' $R/report/report.md | tee -a $S
fi
tar czf $OUT/final.tgz -C $OUT r
note "total $(( $(date +%s) - T0 )) s, $NGPU GPUs"
