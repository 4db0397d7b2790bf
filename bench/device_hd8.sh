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
#                                      (when it imports), interleaved (HD8_SYSTEMS, HD8_ROUNDS;
#                                      HD8_DTYPES, default bf16);
#                                      with HD8_DB, that tuning database's winners instead of
#                                      the defaults; HD8_GROUP query heads per K/V head (default
#                                      1; 8 is grouped-query prefill), HD8_SEQLENS (default the grid's),
#                                      HD8_TAG (the folder compare_TAG)
#   bash bench/device_hd8.sh quality   bench/tune_quality.py on each QUALITY_ONLY filter of the
#                                      sm_90a forward spec (default d = 256 causal and d = 64
#                                      non-causal bf16: 12 buckets, 1282 variants, whose exhaustive
#                                      tunes took 173 s and 308 s on an H100 with a cold compile
#                                      cache, so that with the searches and the re-measurement both
#                                      need more than one call: one filter a call, e.g.
#                                      QUALITY_ONLY=d=64,dtype=bf16,causal=0, or the call again;
#                                      d = 80 and 160 bf16 and
#                                      d = 128 causal have 5376 more): the search (QUALITY_SEARCH,
#                                      default ranked; or halving) and
#                                      the exhaustive tune into $QUALITY_DIR (default
#                                      /tmp/ft-quality, which outlives the call while the machine
#                                      stays warm: HD8_DB=$QUALITY_DIR/exhaustive.db for compare;
#                                      a tune cut by the call's limit resumes on the next call;
#                                      QUALITY_SECOND=exhaustive (or ranked, halving): a second
#                                      tune of that search measured too;
#                                      QUALITY_NEIGHBOUR=1: every winner on the bucket's neighbour too;
#                                      QUALITY_TRACE=1: the workers' conversation timed
#                                      (bench/worker_tap_ts.py), nvidia-smi sampled every 100 ms,
#                                      and bench/clock_match.py on them)
#   bash bench/device_hd8.sh knobs     the knobs of 2026-12-05 (eighth stop), first on a GPU:
#                                      flashtune verify of the ostore=1 variants at d = 128 bf16 with
#                                      128-row tiles and two stages, d = 80 f16 (32-byte swizzle)
#                                      and d = 64 bf16 with 192-row tiles, the early_rescale=1,ctas=1 ones
#                                      at d = 256 bf16 with 80-key tiles and d = 192 f16 with
#                                      128-row tiles, the overlap=2 ones at d = 128 bf16 with
#                                      128-key tiles and d = 64 f16 with 192-row tiles, ping-pong of
#                                      three warpgroups at d = 64 bf16 and d = 96 f16 (psmem)
#                                      (KNOBS_VERIFY overrides: FILTER words; each verify stops at
#                                      VERIFY_LIMIT, 150 s), compute-sanitizer's three tools on an
#                                      ostore causal d = 128 variant, an early_rescale d = 256 one and
#                                      an overlap=2 causal d = 128 one with ostore, then
#                                      bench/knob_ab.py: each knob's twins interleaved (KNOBS_AB=0
#                                      leaves it out)
#   bash bench/device_hd8.sh pack      pack=1 (2026-12-07, first on a GPU; the spec keeps it out
#                                      until it passes): through a copy of the spec without that
#                                      constraint (specs/zz_pack.lua, made here), flashtune verify
#                                      of pack twins of d = 64's 192 x 128 default in both dtypes,
#                                      of d = 128's default with O through a packed TMA map, of an
#                                      ostore one at d = 72 with a 32-byte swizzle, of causal ones
#                                      (d = 64's 192 x 128 and 128 x 128 with three stages at
#                                      balance 0, 1 and 2, d = 128's causal default, a chained
#                                      one, a two-CTA one, a three-warpgroup ping-pong psmem one
#                                      with FMA exponentials) and of the non-causal 64 x 80 one
#                                      that faulted on 4097 queries without groups; the verify
#                                      shapes' groups are 16, 8, 4 and (full only) 3, the last
#                                      unpacked; compute-sanitizer on d = 64's 128 x 128 causal
#                                      twin; then bench/knob_ab.py pack 0,1 with 8 query heads a
#                                      K/V head on d = 64's and d = 128's non-causal defaults
#                                      (PACK_AB=0 leaves it out), and the same twins without groups
#                                      (PACK_G1=0 leaves it out)
#   bash bench/device_hd8.sh ablate    each knob's worth: flashtune verify, then an exhaustive
#                                      tune of the sm_90a forward's ABLATE_ONLY filter (default
#                                      d = 64 bf16) into $OUT/ablate.db, and bench/ablation.py
#                                      on its measurements ($OUT/ablate.md)
#   bash bench/device_hd8.sh vsfa4     Nsight Compute's full set on one forward call of flashtune
#                                      (its defaults) and of FlashAttention-4 at each FWD_SHAPES
#                                      entry (D/SEQLEN/CAUSAL, default 64/8192/0 and 256/8192/1;
#                                      bench/profile_call.py --pass fwd, FA4 installed by bench/fa4_install.sh):
#                                      raw metrics and SASS source pages (gzipped CSV, for
#                                      bench/ncu_compare.py A B) and the details page
#   bash bench/device_hd8.sh fulltune  flashtune tune of TUNE_SPECS (default: every built-in spec)
#                                      with --search TUNE_SEARCH (default ranked) into
#                                      $FULLTUNE_DB (default /tmp/ft-full.db, which outlives the
#                                      call while the machine stays warm: a second call resumes),
#                                      compile cache $FULLTUNE_CACHE (default /tmp/ft-cache-full,
#                                      emptied first unless FULLTUNE_WARM=1), FULLTUNE_LIMIT
#                                      seconds at most; its JSON summary and the winners to $OUT
#                                      (and every measurement, fulltune_all.jsonl.gz, and the
#                                      tune's spans of work, fulltune_timeline.jsonl);
#                                      TUNE_PREFETCH_WAIT=all: --prefetch-wait all (TUNE_TAG names
#                                      the files, e.g. TUNE_TAG=all, and FULLTUNE_DB another database)
#   bash bench/device_hd8.sh sched     the causal forward's longest-first order (balance=2):
#                                      flashtune verify of its variants (SCHED_VERIFY: FILTER
#                                      words, default d = 128 bf16 bm = 128, d = 64 f16 192 x 128,
#                                      d = 256 bf16 bn = 80), compute-sanitizer's three tools on
#                                      one (unless SCHED_SANITIZE=0), then bench/knob_ab.py: balance 0, 1 and 2 twins of
#                                      the causal defaults interleaved on the grid (SCHED_SEQLENS)
#   bash bench/device_hd8.sh callpath  bench/call_path.py: one kernel timed by `flashtune run`, by
#                                      the library from PyTorch alone, in tune_quality's rotation,
#                                      and into a preallocated output (CALLPATH_CASES: SHAPE:VARIANT
#                                      words; default the three widest gaps of 2026-12-05's
#                                      recorded-against-re-measured check)
#   bash bench/device_hd8.sh sustain   bench/sustain.py: one kernel back to back for seconds, its time
#                                      per window beside the clock, power and throttle reasons
#                                      (SUSTAIN_CASES: SHAPE:VARIANT words; default d = 64 8k and
#                                      d = 256 512, 12 s of load, twice)
# Expects bench/stage_run.sh's folder in $RUN (default .dev/run). Logs and JSON go to $OUT, one
# line each to $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_common.sh"

# knob_twins KNOB VALUES SEQLENS BASES: bench/knob_ab.py's interleaved twins of the ';'-separated
# BASES with KNOB at each of VALUES (KNOBS_LIMIT seconds, default 240), its last lines to the summary.
knob_twins() {
  local t0
  t0=$(date +%s)
  timeout "${KNOBS_LIMIT:-240}" python3 bench/knob_ab.py --knob "$1" --values "$2" --seqlens "$3" --bases "$4" \
    --group "${KNOB_GROUP:-1}" --spec "${KNOB_SPEC:-specs/flash_fwd_sm90.lua}" --json "$OUT/knob_ab_${KNOB_TAG:-$1}.json" > "$OUT/knob_ab_${KNOB_TAG:-$1}.txt" 2>&1
  note "knob_ab $1 (${KNOB_GROUP:-1} query heads a K/V head): exit $? in $(since "$t0") s"
  tail -n 10 "$OUT/knob_ab_${KNOB_TAG:-$1}.txt" | tee -a "$summary"
}

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
  pack)
    # pack=1 is pruned since it failed (2026-12-07): its twins through a copy without the constraint
    sed '/only once the GPU verifies them/,+1d' specs/flash_fwd_sm90.lua > specs/zz_pack.lua
    fixed=pingpong=0,psmem=0,pexp=0,skip_rescale=0,early_rescale=0
    n=0
    for only in "d=64,bm=192,bn=128,stages=2,overlap=0,ostore=0,ctas=1,causal=0,$fixed,pack=1" \
        "d=128,bm=128,bn=128,stages=2,overlap=1,ostore=1,ctas=1,causal=0,dtype=bf16,$fixed,pack=1" \
        "d=72,bm=128,bn=128,stages=2,pingpong=1,overlap=1,causal=0,dtype=f16,ostore=1,pack=1" \
        "d=64,bm=192,bn=128,stages=2,overlap=0,ostore=0,ctas=1,causal=1,dtype=bf16,$fixed,pack=1" \
        "d=64,bm=128,bn=128,stages=3,overlap=1,ostore=0,ctas=1,causal=1,dtype=bf16,$fixed,pack=1" \
        "d=128,bm=128,bn=128,stages=2,overlap=1,balance=1,ostore=1,ctas=1,causal=1,dtype=bf16,$fixed,pack=1" \
        "d=128,bm=128,bn=128,stages=2,overlap=2,balance=0,ostore=1,ctas=1,causal=1,dtype=f16,$fixed,pack=1" \
        "d=64,bm=64,bn=128,stages=2,overlap=1,balance=0,ostore=0,ctas=2,causal=1,dtype=bf16,$fixed,pack=1" \
        "d=64,bm=192,bn=144,stages=2,pingpong=1,overlap=1,psmem=1,pexp=2,balance=0,causal=1,dtype=bf16,ostore=0,skip_rescale=0,early_rescale=0,ctas=1,pack=1" \
        "d=64,bm=64,bn=80,stages=2,overlap=0,ostore=0,ctas=1,causal=0,dtype=bf16,$fixed,pack=1" ${PACK_VERIFY:-}; do
      n=$((n + 1))
      verify "pack$n" specs/zz_pack.lua "$only"
    done
    SANITIZE_LIMIT=${SANITIZE_LIMIT:-80} sanitize pack specs/zz_pack.lua \
      "d=64,bm=128,bn=128,stages=3,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=1"
    bases="d=64,bm=192,bn=128,stages=2,causal=0,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1;d=128,bm=128,bn=128,stages=2,causal=0,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=1,early_rescale=0,ctas=1"
    if [ "${PACK_AB:-1}" != 0 ]; then
      KNOB_SPEC=specs/zz_pack.lua KNOB_GROUP=8 knob_twins pack 0,1 "${PACK_SEQLENS:-1024,4096,16384}" "$bases"
    fi
    if [ "${PACK_G1:-1}" != 0 ]; then # without groups a pack=1 kernel runs unpacked: what does it cost?
      KNOB_SPEC=specs/zz_pack.lua KNOB_GROUP=1 KNOB_TAG=pack_g1 KNOBS_LIMIT=${PACK_G1_LIMIT:-100} \
        knob_twins pack 0,1 "${PACK_G1_SEQLENS:-1024,4096}" "$bases"
    fi
    ;;
  sanitize)
    sanitize hd8 specs/flash_fwd_sm90.lua \
      "${HD8_SANITIZE:-d=72,bm=128,bn=128,stages=2,causal=0,dtype=bf16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1}"
    ;;
  compare)
    db="--no-db"
    [ -n "${HD8_DB:-}" ] && db="--db $HD8_DB --flashtune $ft"
    args="--head-dims ${HD8_DIMS:-72,80,88,160} --hidden ${HD8_HIDDEN:-2880} --dtypes ${HD8_DTYPES:-bf16} $db --no-plots
          --rounds ${HD8_ROUNDS:-2} --systems ${HD8_SYSTEMS:-flashtune,cudnn,fa4} --group ${HD8_GROUP:-1}
          ${HD8_SEQLENS:+--seqlens $HD8_SEQLENS}"
    tag=compare${HD8_TAG:+_$HD8_TAG}
    python3 bench/report.py $args --out "$OUT/$tag" > "$OUT/$tag.txt" 2> "$OUT/$tag.err"
    note "report.py $(echo $args): exit $? in $(since "$t0") s"
    sed -n '/^## Geometric means/,/^## Where/p' "$OUT/$tag/report.md" | grep '^|' | tee -a "$summary"
    ;;
  quality)
    qdir=${QUALITY_DIR:-/tmp/ft-quality}
    onlys=()
    for only in ${QUALITY_ONLY:-d=256,dtype=bf16,causal=1 d=64,dtype=bf16,causal=0}; do
      onlys+=(--only "$only")
    done
    if [ "${QUALITY_TRACE:-0}" = 1 ]; then # the worker's conversation timed, and the clock sampled
      rm -f "$OUT/tap.in" "$OUT/tap.out"
      TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits \
        -lms 100 > "$OUT/smi.csv" 2>&1 &
      smi=$!
      export FLASHTUNE_WORKER=$PWD/bench/worker_tap_ts.py TAP_REAL=$(realpath "$ft") TAP_LOG=$OUT/tap
    fi
    timeout "${QUALITY_LIMIT:-540}" python3 bench/tune_quality.py --flashtune "$ft" --spec specs/flash_fwd_sm90.lua \
      "${onlys[@]}" --search "${QUALITY_SEARCH:-ranked}" --rounds "${QUALITY_ROUNDS:-3}" --reps "${QUALITY_REPS:-10}" ${QUALITY_SECOND:+--second --second-search $QUALITY_SECOND} ${QUALITY_NEIGHBOUR:+--neighbour} \
      --out "$qdir" > "$OUT/quality.txt" 2>&1
    note "tune_quality ${onlys[*]}: exit $? in $(since "$t0") s"
    cp "$qdir"/quality.json "$qdir"/quality.md "$OUT"/ 2> /dev/null
    "$ft" query --db "$qdir/exhaustive.db" --all --json > "$OUT/quality_exhaustive_all.jsonl" 2>&1
    "$ft" query --db "$qdir/search.db" --all --json > "$OUT/quality_search_all.jsonl" 2>&1
    grep -E '^tune|^buckets' "$OUT/quality.txt" | tee -a "$summary"
    if [ "${QUALITY_TRACE:-0}" = 1 ]; then
      kill "$smi" 2> /dev/null
      unset FLASHTUNE_WORKER TAP_REAL TAP_LOG
      python3 bench/clock_match.py --tap "$OUT/tap" --smi "$OUT/smi.csv" --quality "$OUT/quality.json" \
        --json "$OUT/clock_match.json" > "$OUT/clock_match.txt" 2>&1
      note "clock_match: exit $?"
      gzip -f "$OUT/tap.in" "$OUT/tap.out" "$OUT/smi.csv"
      cut -c1-150 "$OUT/clock_match.txt" | tee -a "$summary"
    fi
    ;;
  knobs)
    for only in ${KNOBS_VERIFY:-d=128,ostore=1,dtype=bf16,bm=128,stages=2 d=80,ostore=1,dtype=f16 \
        d=64,ostore=1,dtype=bf16,bm=192 d=256,early_rescale=1,ctas=1,dtype=bf16,bn=80 d=192,early_rescale=1,ctas=1,dtype=f16,bm=128 \
        d=128,overlap=2,dtype=bf16,bn=128 d=64,overlap=2,dtype=f16,bm=192 d=64,pingpong=1,bm=192,dtype=bf16 \
        d=96,pingpong=1,bm=192,psmem=1,dtype=f16}; do
      verify "knob_${only//[=,]/_}" specs/flash_fwd_sm90.lua "$only"
    done
    sanitize ostore specs/flash_fwd_sm90.lua \
      d=128,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,balance=2,psmem=0,pexp=0,skip_rescale=0,ostore=1,early_rescale=0,ctas=1
    sanitize early specs/flash_fwd_sm90.lua \
      d=256,bm=128,bn=80,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=1,ctas=1
    sanitize across specs/flash_fwd_sm90.lua \
      d=128,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=2,balance=2,psmem=0,pexp=0,skip_rescale=0,ostore=1,early_rescale=0,ctas=1
    if [ "${KNOBS_AB:-1}" != 0 ]; then
      # ostore on the built-in defaults of d = 64 and 128 (non-causal; 128 causal too): 512 and 1k
      # are where O's stores weigh most
      knob_twins ostore 0,1 512,1024,4096 \
        "d=64,bm=192,bn=128,stages=2,causal=0,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,early_rescale=0,ctas=1;d=128,bm=128,bn=128,stages=2,causal=0,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,early_rescale=0,ctas=1;d=128,bm=128,bn=128,stages=2,causal=1,pingpong=0,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,early_rescale=0,ctas=1"
      # early_rescale on the defaults of d = 256 and 192
      knob_twins early_rescale 0,1 512,2048,8192 \
        "d=256,bm=128,bn=80,stages=2,causal=0,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0;d=256,bm=128,bn=80,stages=2,causal=1,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0;d=192,bm=128,bn=96,stages=2,causal=0,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0"
      # the overlap across blocks (2) against within (1) and none (0), on the defaults' tiles
      knob_twins overlap 1,2,0 512,1024,4096 \
        "d=64,bm=192,bn=128,stages=2,causal=0,pingpong=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1;d=128,bm=128,bn=128,stages=2,causal=0,pingpong=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1;d=128,bm=128,bn=128,stages=2,causal=1,pingpong=0,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1"
      # ping-pong of three warpgroups: FlashAttention-4's d <= 64 point (192 x 128, overlapped,
      # its scheduler barrier) against the same tile without turns, and d = 96's 192 x 144 with
      # P through shared memory
      knob_twins pingpong 0,1 1024,4096,16384 \
        "d=64,bm=192,bn=128,stages=2,causal=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1;d=64,bm=192,bn=128,stages=2,causal=1,overlap=1,balance=2,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1;d=96,bm=192,bn=144,stages=2,causal=0,overlap=1,balance=0,psmem=1,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1"
    fi
    ;;
  ablate)
    only=${ABLATE_ONLY:-d=64,dtype=bf16}
    verify ablate specs/flash_fwd_sm90.lua "$only"
    t0=$(date +%s)
    timeout "${ABLATE_LIMIT:-300}" "$ft" tune specs/flash_fwd_sm90.lua --db "$OUT/ablate.db" --only "$only" \
      --search exhaustive -q --json > "$OUT/ablate_tune.txt" 2>&1
    note "tune --only $only --search exhaustive: exit $? in $(since "$t0") s"
    "$ft" query --db "$OUT/ablate.db" --all --json > "$OUT/ablate_all.jsonl" 2>&1
    python3 bench/ablation.py "$OUT/ablate_all.jsonl" --markdown > "$OUT/ablate.md" 2>&1
    grep -E '^\| (bm|bn|stages|overlap|pingpong|balance|psmem|ostore|early_rescale|geometric)' "$OUT/ablate.md" | tee -a "$summary"
    ;;
  vsfa4)
    vs_fa4 fwd "${FWD_SHAPES:-64/8192/0 256/8192/1}" fwd_vsfa4 2 1 2
    ;;
  fulltune)
    cache=${FULLTUNE_CACHE:-/tmp/ft-cache-full} db=${FULLTUNE_DB:-/tmp/ft-full.db}
    [ -n "${FULLTUNE_WARM:-}" ] || rm -rf "$cache"
    specs=()
    for spec in ${TUNE_SPECS:-}; do specs+=("$spec"); done
    timeout "${FULLTUNE_LIMIT:-540}" "$ft" tune "${specs[@]}" --db "$db" --cache-dir "$cache" \
      --search "${TUNE_SEARCH:-ranked}" --prefetch-wait "${TUNE_PREFETCH_WAIT:-own}" --json -q \
      --timeline "$OUT/fulltune_timeline${TUNE_TAG:+_$TUNE_TAG}.jsonl" \
      > "$OUT/fulltune_${TUNE_TAG:-all}.json" 2> "$OUT/fulltune_${TUNE_TAG:-all}.err"
    note "tune ${specs[*]:-(built-in specs)} --search ${TUNE_SEARCH:-ranked} --prefetch-wait ${TUNE_PREFETCH_WAIT:-own}: exit $? in $(since "$t0") s"
    tail -n 1 "$OUT/fulltune_${TUNE_TAG:-all}.json" | tee -a "$summary"
    "$ft" query --db "$db" --json > "$OUT/fulltune_winners${TUNE_TAG:+_$TUNE_TAG}.jsonl" 2>&1
    "$ft" query --db "$db" --all --json 2>&1 | gzip > "$OUT/fulltune_all${TUNE_TAG:+_$TUNE_TAG}.jsonl.gz" # every measurement, per family
    ;;
  sched)
    for only in ${SCHED_VERIFY:-d=128,dtype=bf16,causal=1,balance=2,bm=128,stages=2 \
        d=64,dtype=f16,causal=1,balance=2,bm=192,bn=128 d=256,dtype=bf16,causal=1,balance=2,bn=80,stages=2}; do
      verify "sched_${only//[=,]/_}" specs/flash_fwd_sm90.lua "$only"
    done
    [ "${SCHED_SANITIZE:-1}" = 0 ] || sanitize sched specs/flash_fwd_sm90.lua \
      d=128,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=2,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1
    t0=$(date +%s)
    timeout "${SCHED_LIMIT:-300}" python3 bench/knob_ab.py --knob balance --values 0,1,2 \
      --seqlens "${SCHED_SEQLENS:-1024,4096,16384}" --json "$OUT/sched_ab.json" > "$OUT/sched_ab.txt" 2>&1
    note "knob_ab balance: exit $? in $(since "$t0") s"
    tail -n 13 "$OUT/sched_ab.txt" | tee -a "$summary"
    ;;
  callpath)
    v64=d=64,bm=192,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1
    v256=d=256,bm=128,bn=64,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1
    cases=()
    for c in ${CALLPATH_CASES:-b=16,hq=32,sq=1024:$v64 b=2,hq=32,sq=8192:$v64 b=32,hq=8,sq=512:$v256}; do
      cases+=(--case "$c")
    done
    timeout "${CALLPATH_LIMIT:-300}" python3 bench/call_path.py --flashtune "$ft" --spec specs/flash_fwd_sm90.lua \
      "${cases[@]}" --json "$OUT/call_path.json" > "$OUT/call_path.txt" 2>&1
    note "call_path: exit $? in $(since "$t0") s"
    cut -c1-200 "$OUT/call_path.txt" | tee -a "$summary"
    ;;
  sustain)
    v64=d=64,bm=192,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1
    v256=d=256,bm=128,bn=64,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1
    i=0
    for c in ${SUSTAIN_CASES:-b=2,hq=32,sq=8192:$v64 b=32,hq=8,sq=512:$v256}; do
      i=$((i + 1))
      timeout "${SUSTAIN_LIMIT:-120}" python3 bench/sustain.py --spec specs/flash_fwd_sm90.lua --shape "${c%%:*}" \
        --variant "${c#*:}" --load "${SUSTAIN_LOAD:-12}" --idle 3 --cycles 2 --json "$OUT/sustain$i.json" \
        > "$OUT/sustain$i.txt" 2>&1
      note "sustain ${c%%:*}: exit $? in $(since "$t0") s: $(tail -n 1 "$OUT/sustain$i.txt")"
    done
    ;;
  *)
    note "unknown mode $mode (verify, sanitize, compare, quality, ablate, vsfa4, fulltune, sched, callpath, sustain)"
    ;;
  esac
done
