#!/bin/bash
# The forward at head dims that are odd multiples of 8 (72, 88, 120, 136, 200, ...), on the GPU
# machine, as it was run:
#   bash bench/device_hd8.sh verify    flashtune verify of every variant that fits: the sm_90a
#                                      forward at d = 72 and 120 bf16, 88 and 200 f16; the sm80
#                                      forward at 72 bf16 and 88 f16; split-key decode at 72 bf16
#                                      and 136 f16 (HD8_VERIFY overrides: SPEC:FILTER words)
#   bash bench/device_hd8.sh sanitize  compute-sanitizer memcheck, racecheck and synccheck on
#                                      flashtune verify of HD8_SANITIZE (default: the sm_90a d = 72
#                                      ping-pong variant whose P·V is m64n80k16 over a 72-wide V)
#   bash bench/device_hd8.sh compare   bench/report.py at HD8_DIMS (default 72,80,88,160) on the
#                                      grid's seqlens with HD8_HIDDEN (default 2880, which every
#                                      one of them divides): flashtune's defaults, cuDNN and FA4
#                                      (when it imports), interleaved (HD8_SYSTEMS, HD8_ROUNDS)
# Expects bench/stage_run.sh's folder in $RUN (default .dev/run). Logs and JSON go to $OUT, one
# line each to $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_common.sh"
for mode in "$@"; do
  t0=$(date +%s)
  case $mode in
  verify)
    for job in ${HD8_VERIFY:-flash_fwd_sm90:d=72,dtype=bf16 flash_fwd_sm90:d=120,dtype=bf16 \
        flash_fwd_sm90:d=88,dtype=f16 flash_fwd_sm90:d=200,dtype=f16 flash_fwd:d=72,dtype=bf16 \
        flash_fwd:d=88,dtype=f16 flash_decode:d=72,dtype=bf16 flash_decode:d=136,dtype=f16}; do
      only=${job#*:} tag=${job#*:d=}
      verify "${job%%:*}_d${tag%%,*}" "specs/${job%%:*}.lua" "$only"
    done
    ;;
  sanitize)
    sanitize hd8 specs/flash_fwd_sm90.lua \
      "${HD8_SANITIZE:-d=72,bm=128,bn=128,stages=2,causal=0,dtype=bf16,pingpong=1,overlap=1,balance=0}"
    ;;
  compare)
    args="--head-dims ${HD8_DIMS:-72,80,88,160} --hidden ${HD8_HIDDEN:-2880} --dtypes bf16 --no-db --no-plots
          --rounds ${HD8_ROUNDS:-2} --systems ${HD8_SYSTEMS:-flashtune,cudnn,fa4}"
    python3 bench/report.py $args --out "$OUT/compare" > "$OUT/compare.txt" 2> "$OUT/compare.err"
    note "report.py $(echo $args): exit $? in $(since "$t0") s"
    sed -n '/^## Geometric means/,/^## Where/p' "$OUT/compare/report.md" | grep '^|' | tee -a "$summary"
    ;;
  *)
    note "unknown mode $mode (verify, sanitize, compare)"
    ;;
  esac
done
