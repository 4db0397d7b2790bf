#!/bin/bash
# The backward through the library, the tuner and Python on the GPU machine, as it was run:
#   bash bench/device_train.sh tests   the GPU tests: test_gpu (the public forward and backward),
#                                      test_python_bwd (autograd against fp64, training), gpu_tune,
#                                      test_python, pack.sh's GPU part
#   bash bench/device_train.sh tune    flashtune tune of the backward's buckets (TUNE_ONLY, default
#                                      bf16 non-deterministic at d = 64, 128, 256), compile and
#                                      timing reported apart; the database goes to $OUT/bwd.db
#   bash bench/device_train.sh bench   bench/bwd_compare.py: flashtune's built-in defaults against
#                                      SDPA's FlashAttention-2 and cuDNN (and FlashAttention-4 where
#                                      it imports), interleaved (BENCH_ARGS); then flashtune alone
#                                      with the tuned database when $OUT/bwd.db or BWD_DB exists
#   bash bench/device_train.sh det     the deterministic backward's cost at d = 128
#   bash bench/device_train.sh sanitize  compute-sanitizer memcheck, synccheck and racecheck on
#                                      flashtune verify of the sm_90a backward's default variants
#                                      (SANITIZE_ONLY, filters of specs/flash_bwd_sm90.lua)
# Expects a build with -DFT_STATIC_DEPS=ON in $RUN (default .dev/run: flashtune, libflashtune.so*,
# attention, tests/test_gpu, tests/fake_worker, deps/). Logs go to $OUT, one line each to
# $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_common.sh"
for mode in "$@"; do
  t0=$(date +%s)
  case $mode in
  tests)
    gpu_tests
    t0=$(date +%s)
    sh tests/gpu_tune.sh "$ft" "$RUN/attention" > "$OUT/gpu_tune.txt" 2>&1; note "gpu_tune: exit $? in $(since "$t0") s ($(tail -1 "$OUT/gpu_tune.txt"))"
    t0=$(date +%s)
    python3 tests/test_python.py > "$OUT/test_python.txt" 2>&1; note "test_python: exit $? in $(since "$t0") s ($(tail -1 "$OUT/test_python.txt"))"
    t0=$(date +%s)
    FLASHTUNE_WORKER=$RUN/tests/fake_worker sh tests/pack.sh "$ft" "$RUN/tests/fake_worker" cc "$RUN/libflashtune.so" \
      > "$OUT/pack.txt" 2>&1; note "pack.sh: exit $? in $(since "$t0") s ($(tail -1 "$OUT/pack.txt"))"
    ;;
  tune)
    db=$OUT/bwd.db
    for only in ${TUNE_ONLY:-d=64,dtype=bf16,det=0 d=128,dtype=bf16,det=0 d=256,dtype=bf16,det=0}; do
      t0=$(date +%s)
      timeout "${TUNE_LIMIT:-300}" "$ft" tune specs/flash_bwd.lua --db "$db" --only "$only" -q > "$OUT/tune_$only.txt" 2>&1
      note "tune --only $only: exit $? in $(since "$t0") s: $(grep -E '^(tuned|measured|time)' "$OUT/tune_$only.txt" | tr '\n' ' ')"
    done
    "$ft" query --db "$db" > "$OUT/bwd_winners.txt" 2>&1
    ;;
  bench)
    args=${BENCH_ARGS:---head-dims 64,128,256 --dtypes bf16 --rounds 2}
    python3 bench/bwd_compare.py $args --json "$OUT/bwd_default.json" > "$OUT/bwd_default.txt" 2> "$OUT/bwd_default.err"
    note "bwd_compare (built-in defaults): exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/bwd_default.txt" | tee -a "$summary"
    db=${BWD_DB:-$OUT/bwd.db}
    if [ -f "$db" ]; then
      t0=$(date +%s)
      python3 bench/bwd_compare.py $args --systems flashtune --database "$db" --json "$OUT/bwd_tuned.json" \
        > "$OUT/bwd_tuned.txt" 2> "$OUT/bwd_tuned.err"
      note "bwd_compare (tuned, $db): exit $? in $(since "$t0") s"
      sed -n '/^type/,$p' "$OUT/bwd_tuned.txt" | grep flashtune | tee -a "$summary"
    fi
    ;;
  det)
    python3 bench/bwd_compare.py --head-dims 128 --dtypes bf16 --rounds 2 --deterministic --json "$OUT/bwd_det.json" \
      > "$OUT/bwd_det.txt" 2> "$OUT/bwd_det.err"
    note "bwd_compare --deterministic: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/bwd_det.txt" | grep flashtune | tee -a "$summary"
    ;;
  sanitize)
    n=0
    for only in ${SANITIZE_ONLY:-d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,dtype=bf16 d=64,bm=128,bn=128,causal=0,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=0,dtype=f16 d=256,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dtype=bf16}; do
      n=$((n + 1))
      SANITIZE_LIMIT=${SANITIZE_LIMIT:-200} sanitize "bwd$n" specs/flash_bwd_sm90.lua "$only"
    done
    ;;
  *) note "unknown mode $mode" ;;
  esac
done
