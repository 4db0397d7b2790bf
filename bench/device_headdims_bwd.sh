#!/bin/bash
# The backward at head dims that are multiples of 16, on the GPU machine, as it was run:
#   bash bench/device_headdims_bwd.sh verify   flashtune verify of the sm_90a backward's variants,
#                                              bf16: the spec's listed head dims at once, then 32, 48,
#                                              112, 144 and 224 (taken by its open d); f16 at 80 and
#                                              192; the sm80 family at 80 and 144 (VERIFY_SM80)
#   bash bench/device_headdims_bwd.sh odd      flashtune verify of the backward's variants at odd
#                                              multiples of 8: sm_90a (ODD_VERIFY: 72 bf16, 88 f16,
#                                              168 bf16, 216 f16; and 184 bf16, kvsplit 192 wide),
#                                              sm80 (ODD_SM80: 72 bf16, 120 f16 gqa=atomic, 200 bf16
#                                              deterministic causal), then compute-sanitizer's three
#                                              tools on a d = 72 sm_90a variant
#   bash bench/device_headdims_bwd.sh widths   flashtune verify of the kvsplit variants whose tiles
#                                              are wider than the head dim by a multiple of 32 (112,
#                                              176 and 240, bf16 and f16), then of those the spec
#                                              holds back (a column block wholly past the head dim:
#                                              80, 144, 200, 208 with kvsplit, 136 causal f16, 72),
#                                              on a copy of the spec without that constraint; and
#                                              compute-sanitizer's three tools on a d = 176 variant
#   bash bench/device_headdims_bwd.sh tests    test_gpu (the public backward at 19 head dims, odd
#                                              multiples of 8 among them) and test_python_bwd
#   bash bench/device_headdims_bwd.sh bench    bench/bwd_compare.py at the new head dims (HD_DIMS,
#                                              HD_SEQLENS), flashtune's defaults against SDPA's
#                                              FlashAttention-2 and cuDNN (and FA4 where it imports),
#                                              then the sm80 family forced (HD_SM80_VARIANT) beside them
#   bash bench/device_headdims_bwd.sh ab       bwd_compare at d = 64 and 128 on the whole grid, the
#                                              defaults, SDPA's FA2 and cuDNN, and early_dv=2 twins of
#                                              the defaults ('flashtune alt'), all interleaved
#   bash bench/device_headdims_bwd.sh sanitize compute-sanitizer memcheck, racecheck and synccheck
#                                              on flashtune verify of SANITIZE_ONLY (default: a d = 80
#                                              early_dv=2 causal variant, 32-byte swizzled tiles)
#   bash bench/device_headdims_bwd.sh bar      bwd_compare at d = 64, 128, 256 on the whole grid
#                                              (BAR_ARGS), every system interleaved
#   bash bench/device_headdims_bwd.sh bound    the backward's bound on fp16 d = 144 (both families'
#                                              variants, causal), then (unless BOUND_BENCH=0)
#                                              bwd_compare at d = 80 with a forced two-consumer
#                                              variant beside the defaults
#   bash bench/device_headdims_bwd.sh lpt      verify lpt=1 variants at d = 64 and 128 on the full
#                                              shapes, then (unless LPT_BENCH=0) bwd_compare causal at
#                                              d = 64 and 128 on the whole grid: the defaults, cuDNN,
#                                              and lpt=1 twins of the defaults
#   bash bench/device_headdims_bwd.sh gqa      the sm_90a backward's gqa=atomic (dK and dV summed over a
#                                              group by atomics): flashtune verify of the atomic twins of
#                                              the d = 64 and 128 bf16 defaults' structures, d = 256's
#                                              kvsplit and d = 72 f16 (its shapes have groups of 2 to 8),
#                                              and the sm80 family's at d = 64,
#                                              compute-sanitizer's three tools on the d = 128 causal one,
#                                              then bwd_compare at d = 64 and 128 (GQA_DIMS) with 8 query
#                                              heads a K/V head (GQA_GROUP; GQA_SEQLENS, default
#                                              1024,4096,16384; GQA_CAUSAL, default 0,1): the defaults,
#                                              cuDNN, FA4 where it imports,
#                                              and the defaults' gqa=atomic twins ('flashtune atomic');
#                                              GQA_CHECK=0 leaves the checks out, GQA_COMPARE=0 the comparison
#   bash bench/device_headdims_bwd.sh base     verify the sm_90a backward's d = 64 and 128 bf16 variants (and
#                                              d = 192's kvsplit ones with staged dQ), then
#                                              bwd_compare at d = 64, 128 (BASE_DIMS) on the whole grid:
#                                              this build's defaults against BASE_LIB's (another build,
#                                              e.g. of the commit before a change), cuDNN and FA4 (where
#                                              it imports: bench/fa4_install.sh), interleaved (BASE_SEQLENS,
#                                              default the grid's);
#                                              BASE_VERIFY: more verify filters, BASE_ALT: bwd_compare --alt
#                                              D/C=VARIANT twins beside them ('flashtune alt')
#   bash bench/device_headdims_bwd.sh stream   verify of the early_dv=3 variants at d = 64 and 128,
#                                              compute-sanitizer's three tools on the d = 128 causal
#                                              one, then bwd_compare at d = 64 and 128 on the whole grid:
#                                              the defaults, cuDNN, FA4 and early_dv=3 twins of the
#                                              defaults ('flashtune stream'), interleaved
#   bash bench/device_headdims_bwd.sh profile  Nsight Compute's full set on one backward call of
#                                              each PROFILE_SHAPES entry (D/SEQLEN/CAUSAL, the grid's
#                                              batch and heads), its details page and the SASS
#                                              source page with stall samples (gzipped CSV)
#   bash bench/device_headdims_bwd.sh vsfa4    Nsight Compute's full set on one backward call of
#                                              flashtune and of FlashAttention-4 at each
#                                              VSFA4_SHAPES entry (D/SEQLEN/CAUSAL; FA4 installed by
#                                              bench/fa4_install.sh): the second call's three
#                                              kernels, the raw metrics and SASS source pages
#                                              (gzipped CSV, for bench/ncu_compare.py) and details
#                                              (VSFA4_KNOBS: flashtune's default with those knobs
#                                              changed, e.g. bm=80,early_dv=2 beside FA4's 80-row tile)
#   bash bench/device_headdims_bwd.sh tunebwd  flashtune tune of the sm_90a backward's buckets (TUNED_ONLY, default
#                                              d = 128 bf16, not deterministic) into $TUNED_DB (default
#                                              /tmp/ft-bwd-tuned.db, which outlives the call while the machine
#                                              stays warm; a copy and the winners under $OUT)
#   bash bench/device_headdims_bwd.sh tuned    bwd_compare at TUNED_DIMS (default 128) and BASE_SEQLENS's lengths:
#                                              flashtune with $TUNED_DB's winners, the built-in defaults
#                                              ('flashtune defaults'), cuDNN and FA4, interleaved
#   bash bench/device_headdims_bwd.sh twins    dq_late (the staged dQ partial handed over once the next block's
#                                              products are issued) and qrot (each key block's walk starting
#                                              at its own query block): verify of their variants at d = 64 and
#                                              128 bf16 (and TWINS_VERIFY's filters), compute-sanitizer's three
#                                              tools on the d = 128 deterministic default's dq_late twin and the
#                                              non-causal default's qrot twin, then bwd_compare at d = 64 and 128
#                                              (BASE_SEQLENS, default the grid's): the defaults and their twins
#                                              'flashtune late' (dq_late = 1, dq_red = 0), 'flashtune qrot'
#                                              (qrot = 1, non-causal) and 'flashtune both', cuDNN and FA4,
#                                              interleaved; TWINS_CHECK=0 leaves out the checks, TWINS_BENCH=0
#                                              the timing, TWINS_TAG names the files
# Expects bench/stage_run.sh's folder in $RUN (default .dev/run). Logs and JSON go to $OUT, one
# line each to $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_common.sh"
for mode in "$@"; do
  t0=$(date +%s)
  case $mode in
  verify)
    verify sm90_listed specs/flash_bwd_sm90.lua dtype=bf16
    for d in 32 48 112 144 224; do
      verify "sm90_d$d" specs/flash_bwd_sm90.lua "d=$d,dtype=bf16"
    done
    verify sm90_d80_f16 specs/flash_bwd_sm90.lua d=80,dtype=f16
    verify sm90_d192_f16 specs/flash_bwd_sm90.lua d=192,dtype=f16
    for f in ${VERIFY_SM80:-d=80,dtype=bf16,gqa=loop,det=0 d=144,dtype=f16,gqa=loop,det=0}; do
      verify "sm80_${f%%,*}" specs/flash_bwd.lua "$f"
    done
    ;;
  widths)
    for f in ${WIDTHS_VERIFY:-d=112,kvsplit=1 d=176,kvsplit=1 d=240,kvsplit=1}; do
      verify "sm90_width_${f//[=,]/_}" specs/flash_bwd_sm90.lua "$f"
    done
    sed '/no column block of the tiles lies wholly past/,+1d' specs/flash_bwd_sm90.lua > "$OUT/flash_bwd_sm90_nohold.lua"
    for f in ${NOHOLD_VERIFY:-d=80,kvsplit=1 d=144,kvsplit=1 d=200,kvsplit=1 d=208,kvsplit=1 d=136,causal=1,dtype=f16 d=72,dtype=bf16}; do
      verify "sm90_nohold_${f//[=,]/_}" "$OUT/flash_bwd_sm90_nohold.lua" "$f"
    done
    sanitize bwd_width176 specs/flash_bwd_sm90.lua d=176,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dtype=bf16
    ;;
  odd)
    for f in ${ODD_VERIFY:-d=72,dtype=bf16 d=88,dtype=f16 d=168,dtype=bf16 d=216,dtype=f16 d=184,dtype=bf16,kvsplit=1}; do
      verify "sm90_odd_${f%%,*}" specs/flash_bwd_sm90.lua "$f"
    done
    for f in ${ODD_SM80:-d=72,dtype=bf16,gqa=loop,det=0 d=120,dtype=f16,gqa=atomic d=200,dtype=bf16,det=1,causal=1}; do
      verify "sm80_odd_${f%%,*}" specs/flash_bwd.lua "$f"
    done
    sanitize bwd_odd72 specs/flash_bwd_sm90.lua d=72,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,dtype=bf16
    ;;
  tests)
    gpu_tests
    ;;
  bench)
    args="--head-dims ${HD_DIMS:-80,96,112,160,192} --seqlens ${HD_SEQLENS:-1024,4096} --dtypes bf16 --rounds 2"
    python3 bench/bwd_compare.py $args --json "$OUT/hd_default.json" > "$OUT/hd_default.txt" 2> "$OUT/hd_default.err"
    note "bwd_compare $args (defaults): exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/hd_default.txt" | tee -a "$summary"
    t0=$(date +%s)
    python3 bench/bwd_compare.py $args --systems flashtune --spec specs/flash_bwd.lua --json "$OUT/hd_sm80.json" \
      > "$OUT/hd_sm80.txt" 2> "$OUT/hd_sm80.err"
    note "bwd_compare (the sm80 family's defaults, as on an A100): exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/hd_sm80.txt" | grep flashtune | tee -a "$summary"
    ;;
  ab)
    alt="--alt 64/0=bm=128,bn=128,early_dv=2,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0
         --alt 64/1=bm=128,bn=128,early_dv=2,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0
         --alt 128/0=bm=64,bn=128,early_dv=2,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0
         --alt 128/1=bm=64,bn=128,early_dv=2,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0"
    python3 bench/bwd_compare.py --head-dims 64,128 --dtypes bf16 --rounds ${AB_ROUNDS:-2} $alt --json "$OUT/ab.json" \
      > "$OUT/ab.txt" 2> "$OUT/ab.err"
    note "bwd_compare d=64,128 with the early_dv=2 twins: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/ab.txt" | tee -a "$summary"
    ;;
  sanitize)
    n=0
    for only in ${SANITIZE_ONLY:-d=80,bm=64,bn=64,causal=1,early_dv=2,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,dtype=bf16}; do
      n=$((n + 1))
      sanitize "bwd$n" specs/flash_bwd_sm90.lua "$only"
    done
    ;;
  bar)
    args=${BAR_ARGS:---head-dims 64,128,256 --dtypes bf16 --rounds 2}
    python3 bench/bwd_compare.py $args --json "$OUT/bar.json" > "$OUT/bar.txt" 2> "$OUT/bar.err"
    note "bwd_compare $args: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/bar.txt" | tee -a "$summary"
    ;;
  bound)
    verify sm90_d144_f16 specs/flash_bwd_sm90.lua d=144,dtype=f16
    verify sm80_d144_f16 specs/flash_bwd.lua d=144,dtype=f16,gqa=loop,det=0,causal=1
    [ "${BOUND_BENCH:-1}" = 1 ] || continue
    t0=$(date +%s)
    two="bm=128,bn=128,early_dv=2,lpt=0,kvsplit=0,det=0,s_ahead=0"
    python3 bench/bwd_compare.py --head-dims 80 --seqlens 1024,4096,16384 --systems flashtune,cuDNN --rounds 3 \
      --alt "80/0=$two,dq_red=1" --alt "80/1=$two,dq_red=0" --json "$OUT/d80.json" > "$OUT/d80.txt" 2> "$OUT/d80.err"
    note "bwd_compare d=80, defaults and $two ('flashtune alt'): exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/d80.txt" | tee -a "$summary"
    ;;
  lpt)
    for d in 64 128; do
      t0=$(date +%s)
      timeout 200 "$ft" verify specs/flash_bwd_sm90.lua -q --shapes full --only "d=$d,causal=1,lpt=1,dtype=bf16,early_dv=0" \
        > "$OUT/verify_lpt_d$d.txt" 2>&1
      note "verify --shapes full lpt=1 d=$d: exit $? in $(since "$t0") s: $(grep -E '^summary' "$OUT/verify_lpt_d$d.txt" | tail -1)"
      grep -E ' FAIL ' "$OUT/verify_lpt_d$d.txt" | head -n 5 | tee -a "$summary"
    done
    [ "${LPT_BENCH:-1}" = 1 ] || continue
    t0=$(date +%s)
    python3 bench/bwd_compare.py --head-dims 64,128 --causal 1 --dtypes bf16 --rounds ${AB_ROUNDS:-2} \
      --systems flashtune,cuDNN --alt 64/1=bm=128,bn=128,early_dv=0,lpt=1,kvsplit=0,dq_red=0,det=0,s_ahead=0 \
      --alt 128/1=bm=64,bn=128,early_dv=1,lpt=1,kvsplit=0,dq_red=0,det=0,s_ahead=0 --json "$OUT/lpt.json" \
      > "$OUT/lpt.txt" 2> "$OUT/lpt.err"
    note "bwd_compare causal d=64,128 with lpt=1 twins: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/lpt.txt" | tee -a "$summary"
    ;;
  gqa)
    if [ "${GQA_CHECK:-1}" != 0 ]; then
      verify gqa_d64 specs/flash_bwd_sm90.lua d=64,bm=128,bn=128,lpt=0,kvsplit=0,dq_late=0,qrot=0,gqa=atomic,dtype=bf16
      verify gqa_d128 specs/flash_bwd_sm90.lua d=128,bm=64,bn=128,early_dv=1,kvsplit=0,dq_red=0,gqa=atomic,dtype=bf16
      verify gqa_d256 specs/flash_bwd_sm90.lua d=256,kvsplit=1,dq_red=1,lpt=0,gqa=atomic,dtype=bf16
      verify gqa_d72 specs/flash_bwd_sm90.lua d=72,bm=64,bn=64,early_dv=0,lpt=0,dq_late=0,qrot=0,gqa=atomic,dtype=f16
      # the sm80 family's atomic sums go through the same helpers (ft_bwd_pre.cuh) since 2026-12-07
      verify gqa_sm80 specs/flash_bwd.lua d=64,bm=64,bn=64,warps=4,split=1,stages=2,dtype=bf16,gqa=atomic
      SANITIZE_LIMIT=${SANITIZE_LIMIT:-80} sanitize gqa specs/flash_bwd_sm90.lua \
        d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=0,gqa=atomic,dtype=bf16
    fi
    [ "${GQA_COMPARE:-1}" = 0 ] && continue # the checks alone (e.g. in a call before FA4's second part)
    t0=$(date +%s)
    python3 bench/bwd_compare.py --head-dims ${GQA_DIMS:-64,128} --causal "${GQA_CAUSAL:-0,1}" --group ${GQA_GROUP:-8} --dtypes bf16 \
      --seqlens "${GQA_SEQLENS:-1024,4096,16384}" --rounds ${AB_ROUNDS:-2} --systems flashtune,cuDNN,FA4 \
      --twin atomic:gqa=atomic --json "$OUT/gqa.json" > "$OUT/gqa.txt" 2> "$OUT/gqa.err"
    note "bwd_compare --group ${GQA_GROUP:-8} with the defaults' gqa=atomic twins: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/gqa.txt" | tee -a "$summary"
    ;;
  base)
    verify sm90_d64 specs/flash_bwd_sm90.lua d=64,dtype=bf16
    verify sm90_d128 specs/flash_bwd_sm90.lua d=128,dtype=bf16
    verify sm90_d192_kvsplit specs/flash_bwd_sm90.lua d=192,dtype=bf16,kvsplit=1,dq_red=0
    n=0
    for only in ${BASE_VERIFY:-}; do
      n=$((n + 1))
      verify "sm90_extra$n" specs/flash_bwd_sm90.lua "$only"
    done
    t0=$(date +%s)
    alts=()
    for alt in ${BASE_ALT:-}; do
      alts+=(--alt "$alt")
    done
    python3 bench/bwd_compare.py --head-dims "${BASE_DIMS:-64,128}" --seqlens "${BASE_SEQLENS:-512,1024,2048,4096,8192,16384}" \
      --dtypes bf16 --rounds ${AB_ROUNDS:-2} \
      --systems flashtune,cuDNN,FA4 --base-lib "$BASE_LIB" "${alts[@]}" --json "$OUT/base.json" > "$OUT/base.txt" \
      2> "$OUT/base.err"
    note "bwd_compare against $BASE_LIB${BASE_ALT:+ and the BASE_ALT twins ('flashtune alt')}: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/base.txt" | tee -a "$summary"
    ;;
  tunebwd)
    db=${TUNED_DB:-/tmp/ft-bwd-tuned.db}
    "$ft" tune specs/flash_bwd_sm90.lua --db "$db" --only "${TUNED_ONLY:-d=128,dtype=bf16,det=0}" -q \
      > "$OUT/tunebwd.txt" 2>&1
    note "tune specs/flash_bwd_sm90.lua --only ${TUNED_ONLY:-d=128,dtype=bf16,det=0}: exit $? in $(since "$t0") s"
    tail -n 8 "$OUT/tunebwd.txt" | tee -a "$summary"
    cp "$db" "$OUT/"
    "$ft" query --db "$db" > "$OUT/tunebwd_winners.txt" 2>&1
    ;;
  tuned)
    python3 bench/bwd_compare.py --head-dims "${TUNED_DIMS:-128}" --seqlens "${BASE_SEQLENS:-4096,8192,16384}" \
      --dtypes bf16 --rounds ${AB_ROUNDS:-3} --systems flashtune,cuDNN,FA4 --database "${TUNED_DB:-/tmp/ft-bwd-tuned.db}" \
      --beside-defaults --json "$OUT/tuned${TUNED_TAG:-}.json" > "$OUT/tuned${TUNED_TAG:-}.txt" 2> "$OUT/tuned${TUNED_TAG:-}.err"
    note "bwd_compare, the tuned winners against the built-in defaults: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/tuned${TUNED_TAG:-}.txt" | tee -a "$summary"
    ;;
  twins)
    if [ "${TWINS_CHECK:-1}" != 0 ]; then
      verify late_d64 specs/flash_bwd_sm90.lua d=64,dtype=bf16,dq_late=1
      verify late_d128 specs/flash_bwd_sm90.lua d=128,dtype=bf16,dq_late=1
      verify qrot_d64 specs/flash_bwd_sm90.lua d=64,dtype=bf16,qrot=1
      verify qrot_d128 specs/flash_bwd_sm90.lua d=128,dtype=bf16,qrot=1
      n=0
      for only in ${TWINS_VERIFY:-}; do
        n=$((n + 1))
        verify "twins_extra$n" specs/flash_bwd_sm90.lua "$only"
      done
      SANITIZE_LIMIT=${SANITIZE_LIMIT:-60} sanitize late specs/flash_bwd_sm90.lua \
        d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1,s_ahead=0,dq_late=1,qrot=0,dtype=bf16
      SANITIZE_LIMIT=${SANITIZE_LIMIT:-60} sanitize qrot specs/flash_bwd_sm90.lua \
        d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=1,dtype=bf16
    fi
    [ "${TWINS_BENCH:-1}" != 0 ] || continue
    t0=$(date +%s)
    tag=twins${TWINS_TAG:-}
    python3 bench/bwd_compare.py --head-dims 64,128 --seqlens "${BASE_SEQLENS:-512,1024,2048,4096,8192,16384}" \
      --dtypes bf16 --rounds ${AB_ROUNDS:-3} --systems flashtune,cuDNN,FA4 \
      --twin late:dq_red=0,dq_late=1 --twin qrot:qrot=1 --twin both:dq_red=0,dq_late=1,qrot=1 \
      --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2> "$OUT/$tag.err"
    note "bwd_compare d=64,128 with the defaults' dq_late and qrot twins: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/$tag.txt" | tee -a "$summary"
    ;;
  stream)
    # early_dv=3 (dV's k16 steps issued as Pᵀ's columns are made, dSᵀ from the packed Pᵀ): verify,
    # racecheck on the d = 128 causal one, then twins of the four defaults at d = 64 and 128 with
    # early_dv=3 ('flashtune stream'), with FA4 and cuDNN where they import, interleaved.
    # STREAM_CHECK=0 leaves out the verify and sanitizers, STREAM_BENCH=0 the twins.
    if [ "${STREAM_CHECK:-1}" != 0 ]; then
      verify stream_d128 specs/flash_bwd_sm90.lua d=128,early_dv=3
      verify stream_d64 specs/flash_bwd_sm90.lua d=64,early_dv=3,dtype=bf16
      SANITIZE_LIMIT=${SANITIZE_LIMIT:-60} sanitize stream specs/flash_bwd_sm90.lua \
        d=128,bm=64,bn=128,causal=1,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=0,dtype=bf16
    fi
    [ "${STREAM_BENCH:-1}" != 0 ] || continue
    t0=$(date +%s)
    python3 bench/bwd_compare.py --head-dims 64,128 --dtypes bf16 --rounds ${AB_ROUNDS:-2} \
      --systems flashtune,cuDNN,FA4 \
      --alt 64/0:stream=bm=128,bn=128,early_dv=3,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0 \
      --alt 64/1:stream=bm=128,bn=128,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0 \
      --alt 128/0:stream=bm=64,bn=128,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0 \
      --alt 128/1:stream=bm=64,bn=128,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0 \
      --json "$OUT/stream.json" > "$OUT/stream.txt" 2> "$OUT/stream.err"
    note "bwd_compare d=64,128 with early_dv=3 twins of the defaults: exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/stream.txt" | tee -a "$summary"
    ;;
  profile)
    for shape in ${PROFILE_SHAPES:-128/8192/1 64/8192/1}; do
      IFS=/ read -r d s c <<< "$shape"
      t0=$(date +%s)
      rep=$OUT/prof_d${d}_s${s}_c$c
      timeout "${PROFILE_LIMIT:-240}" ncu --clock-control none --set full --import-source no --kernel-name regex:bwd \
        --launch-skip 3 --launch-count 3 -f -o "$rep" python3 bench/profile_call.py --head-dim "$d" --seqlen "$s" \
        --causal "$c" > "$rep.log" 2>&1
      note "ncu d=$d s=$s causal=$c: exit $? in $(since "$t0") s: $(grep -E '^ft|calls' "$rep.log" | tail -1)"
      ncu -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1
      ncu -i "$rep.ncu-rep" --page source --csv --print-source sass \
        2> /dev/null | gzip > "$rep.sass.csv.gz"
      grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|Shared|Registers Per|Issue Slots Busy|No Eligible' \
        "$rep.details.txt" | head -n 24 | tee -a "$summary"
    done
    ;;
  vsfa4)
    vs_fa4 bwd "${VSFA4_SHAPES:-128/16384/0 128/8192/1}" vsfa4 3 3 1
    ;;
  *)
    echo "device_headdims_bwd.sh: unknown mode $mode" >&2
    exit 2
    ;;
  esac
done
