#!/bin/bash
# One call on the GPU machine: smoke test, GPU tests, verification of every variant,
# the side-by-side benchmark against PyTorch SDPA, and compute-sanitizer on a few variants.
# Expects a build made with -DFT_STATIC_DEPS=ON in $BUILD (default build-dev), with
# liblua5.4.so.0 copied into $BUILD/deps for the shared library. Logs go to $OUT.
#
# BENCH_REPORT=1 adds bench/report.py after the benchmark (outputs in $OUT/report);
# REPORT_ONLY=1 runs only that (after the GPU's description). Its inputs:
#   REPORT_ARGS           more options, e.g. '--seqlens 4096,16384 --head-dims 128 --flex'
#   REPORT_DB             tuning database the flashtune context dispatches to (and whose
#                         tuning cost is reported); REPORT_TUNE_LOG: what that tune printed
#   REPORT_TUNE=1         tune first, into $OUT/report/tuning.db (at most REPORT_TUNE_LIMIT s,
#                         default 330), and report on that database and log
#   REPORT_OVERHEAD_JSON  bench/overhead's JSON (default: $OUT/overhead.json when present)
#   REPORT_LIMIT          seconds for report.py (default 420; after REPORT_TUNE, 560 less the
#                         tune's time); it stops starting shapes a minute before the limit and
#                         writes what it measured when the limit ends it
set -u
BUILD=${BUILD:-build-dev}
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$BUILD/deps:${LD_LIBRARY_PATH:-}
export FLASHTUNE_CACHE_DIR=/tmp/ft-cache FLASHTUNE_LIB=$PWD/$BUILD/libflashtune.so PYTHONUNBUFFERED=1
ft=$BUILD/flashtune
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' | tee -a "$OUT/gpu.txt"
$ft devices | tee -a "$OUT/gpu.txt"

report_step() {
  local rdir=$OUT/report limit=${REPORT_LIMIT:-420} db=${REPORT_DB:-} log=${REPORT_TUNE_LOG:-}
  local ov=${REPORT_OVERHEAD_JSON:-} t1 rc
  local -a rargs=()
  mkdir -p "$rdir"
  if [ "${REPORT_TUNE:-0}" = 1 ]; then
    db=$rdir/tuning.db log=$rdir/tune.txt t1=$(date +%s)
    timeout "${REPORT_TUNE_LIMIT:-330}" "$ft" tune --db "$db" -q > "$log" 2>&1
    rc=$?
    echo "tune 1: rc=$rc in $(( $(date +%s) - t1 )) s" >> "$log"
    note "report tune: rc=$rc in $(( $(date +%s) - t1 )) s; $(grep '^time:' "$log")"
    # one call has 600 s: what the tune left, unless REPORT_LIMIT says otherwise
    [ -z "${REPORT_LIMIT:-}" ] && limit=$(( 560 - ($(date +%s) - t1) )) && [ "$limit" -lt 120 ] && limit=120
  fi
  [ -z "$ov" ] && [ -f "$OUT/overhead.json" ] && ov=$OUT/overhead.json
  [ -n "$db" ] && rargs+=(--db "$db")
  [ -n "$log" ] && rargs+=(--tune-log "$log")
  [ -n "$ov" ] && rargs+=(--overhead-json "$ov")
  t1=$(date +%s)
  # shellcheck disable=SC2086 # REPORT_ARGS is a list of options
  timeout "$limit" python3 bench/report.py --out "$rdir" --flashtune "$ft" --budget $((limit > 120 ? limit - 60 : limit / 2)) \
    ${rargs[@]+"${rargs[@]}"} ${REPORT_ARGS:-} > "$OUT/report.txt" 2>&1
  note "report: rc=$? in $(( $(date +%s) - t1 )) s; $(grep -c '^| ' "$rdir/report.md" 2>/dev/null) table lines in $rdir/report.md"
  grep -A 12 '^## Geometric means' "$rdir/report.md" 2>/dev/null | tee -a "$summary"
  grep '^- cuDNN is ahead' "$rdir/report.md" 2>/dev/null | tee -a "$summary"
}
if [ "${REPORT_ONLY:-0}" = 1 ]; then
  report_step
  exit 0
fi

t0=$(date +%s)
$ft run --variant 'd=128,bm=128,bn=64,warps=4,stages=2,qreg=0,overlap=0' --shape 'b=4,hq=16,sq=4096,d=128' > "$OUT/run.txt" 2>&1
note "smoke run: rc=$? $(tail -n 1 "$OUT/run.txt")"

$BUILD/tests/test_gpu > "$OUT/test_gpu.txt" 2>&1
note "test_gpu: rc=$? $(grep -c '^ok' "$OUT/test_gpu.txt") ok, $(grep -c '^FAIL' "$OUT/test_gpu.txt") failed; $(grep -m1 FAILED "$OUT/test_gpu.txt")"

: > "$OUT/verify.txt"
for d in ${VERIFY_DIMS:-32 64 96 128 192 256}; do
  $ft verify -q --only "d=$d" >> "$OUT/verify.txt" 2>&1
  note "verify d=$d: rc=$? $(grep '^summary' "$OUT/verify.txt" | tail -n 1)"
done
note "verify FAIL rows: $(grep -c ' FAIL ' "$OUT/verify.txt")"
note "elapsed before bench: $(( $(date +%s) - t0 )) s"

[ -n "${SKIP_BENCH:-}" ] || python3 bench/sdpa_compare.py --flashtune $ft --seqlens ${BENCH_SEQLENS:-4096,16384} \
  --head-dims ${BENCH_DIMS:-64,128} --dtypes ${BENCH_DTYPES:-f16} --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
note "bench: rc=$?"
tail -n 8 "$OUT/bench.txt" | tee -a "$summary"
[ "${BENCH_REPORT:-0}" = 1 ] && report_step
note "elapsed before sanitizer: $(( $(date +%s) - t0 )) s"

[ -n "${SKIP_SANITIZER:-}" ] && SANITIZE_VARIANTS=none
for v in ${SANITIZE_VARIANTS:-'d=128,bm=128,bn=64,warps=4,stages=2,qreg=0,causal=1,overlap=1' 'd=64,bm=64,bn=32,warps=4,stages=3,qreg=1,causal=0,overlap=1' 'd=96,bm=128,bn=32,warps=8,stages=1,qreg=0,causal=1,overlap=0'}; do
  [ "$v" = none ] && break
  for tool in memcheck racecheck; do
    d=${v#d=}; d=${d%%,*}
    compute-sanitizer --tool $tool --error-exitcode 9 $ft run --no-time --variant "$v" \
      --shape "b=1,hq=2,hkv=1,sq=300,sk=257,d=$d" >> "$OUT/sanitizer.txt" 2>&1
    note "sanitizer $tool $v: rc=$?"
  done
done
# Optionally re-measure part of an earlier tuning database (RETUNE_DB, RETUNE_ONLY).
if [ -n "${RETUNE_DB:-}" ]; then
  cp "$RETUNE_DB" /tmp/retune.db
  $ft tune --db /tmp/retune.db --remeasure --only "$RETUNE_ONLY" -q > "$OUT/retune.txt" 2>&1
  note "retune ($RETUNE_ONLY): rc=$? $(grep -E '^(measured|winners)' "$OUT/retune.txt" | tr '\n' ' ')"
  $ft query --db /tmp/retune.db > "$OUT/winners.txt" 2>&1
  cp /tmp/retune.db "$OUT/tuning.db"
fi

# What the compiler made of the benchmark's favourite variants.
for v in ${SASS_VARIANTS:-'d=128,bm=128,bn=64,warps=4,stages=2,causal=0,dtype=f16,qreg=0,overlap=0' 'd=64,bm=128,bn=64,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0'}; do
  $ft gen specs/flash_fwd.lua --variant "$v" > /tmp/k.cu && nvcc -arch=sm_90 -cubin -o /tmp/k.cubin /tmp/k.cu &&
    cuobjdump -sass /tmp/k.cubin > /tmp/k.sass &&
    note "sass $v: $(for op in HMMA LDSM MUFU.EX2 LDGSTS BAR.SYNC LDL STL FMUL FFMA SHFL; do printf '%s=%s ' $op $(grep -c "$op" /tmp/k.sass); done)"
done
note "total: $(( $(date +%s) - t0 )) s"
