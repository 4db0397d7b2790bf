#!/bin/bash
# The sm_90a templates' code changes behind macros (FT_DESC64, FT_QW, FT_HOLD_BASE; bench/NOTES.md,
# fifteenth and sixteenth stops), timed on the GPU machine from staged builds (bench/stage_run.sh)
# named by the macros they turn on (as they were timed, bench/results/h100-2026-12-06-macros/;
# FT_HOLD_BASE is on by default since 3d6afa7, the other two off):
#   BASE  all off (from HEAD: `#define FT_HOLD_BASE 0`)    (default folder .dev/run)
#   DESC  FT_DESC64                                        (.dev/run_desc64)
#   ALL   FT_DESC64, the forward's FT_QW, the backward's   (.dev/run_all)
#         FT_HOLD_BASE
#   HOLD  the backward's FT_HOLD_BASE alone (HEAD as is)   (.dev/run_hold)
# (the variables BASE, DESC, ALL and HOLD name other folders). A build is looked for only when a step
# names it, so that a call can carry some of them (the device keeps what earlier calls carried
# while it stays warm). Steps, run in the order given:
#   verify:BUILD     flashtune verify with BUILD of the built-in defaults of the sm_90a forward
#                    at d = 64, 128 and 256 and of the sm_90a backward at d = 64 and 128 (bf16,
#                    causal both ways: 14 kernels, each alone), then every backward variant of
#                    each FILTER in VERIFY_EXTRA (space-separated, e.g. d=128,dtype=bf16,bm=80)
#   sanitize:BUILD   compute-sanitizer's three tools on BUILD's d = 256 non-causal forward default
#                    and d = 128 causal backward default
#   fwd:NEW:OLD      bench/ab_libs.py, NEW's library against OLD's (the forward's defaults, 18
#                    shapes, AB_ROUNDS rounds, default 3, interleaved in one process; AB_PROCESSES=1:
#                    alternating processes, as before 2026-12-07); no anchor in it: the
#                    question is the change, the anchors come with the bar's run after
#   bwd:NEW:OLD      bench/bwd_compare.py with NEW as flashtune and OLD as 'flashtune base',
#                    cuDNN interleaved, bf16, head dims BWD_DIMS (default 64,128), BWD_SEQLENS
#                    (default 1024,4096,16384), AB_ROUNDS rounds; BWD_TWINS adds NEW's defaults
#                    with knobs changed (space-separated LABEL:KNOBS words, bwd_compare.py's
#                    --twin; the knobs must make a kept variant at every head dim: bm=80 is
#                    d = 128's alone of the two)
#   e.g. bash bench/device_macros.sh verify:ALL fwd:DESC:BASE fwd:ALL:DESC bwd:ALL:DESC
# Logs and JSON under $OUT (default /tmp/ft-out), a line a step in $OUT/summary.txt.
set -u
cd "$(dirname "$0")/.."

# The folder of build $1 (BASE, DESC, ALL or HOLD), or a message and failure when it is not here.
build_dir() {
  local dir
  case $1 in
    BASE) dir=${BASE:-.dev/run} ;;
    DESC) dir=${DESC:-.dev/run_desc64} ;;
    ALL) dir=${ALL:-.dev/run_all} ;;
    HOLD) dir=${HOLD:-.dev/run_hold} ;;
    *) echo "device_macros: no build named $1 (BASE, DESC, ALL, HOLD)" >&2; return 1 ;;
  esac
  [ -x "$dir/flashtune" ] || { echo "device_macros: build $1 is not here ($dir)" >&2; return 1; }
  (cd "$dir" && pwd)
}

[ $# -gt 0 ] || { echo "usage: bash bench/device_macros.sh STEP... (verify:B sanitize:B fwd:NEW:OLD bwd:NEW:OLD)" >&2; exit 2; }
# device_common.sh wants one staged build on the library path: the first one named.
first=$1; first=${first#*:}; first=${first%%:*}
RUN=$(build_dir "$first") || exit 2
source bench/device_common.sh

# The built-in defaults of SPEC at the head dims given, one full variant a line.
defaults_of() {
  sh bench/sm90_defaults.sh "$RUN/flashtune" "$@"
}

for step in "$@"; do
  IFS=: read -r mode new old <<< "$step"
  newdir=$(build_dir "$new") || { note "$step: skipped, no build $new"; continue; }
  if [ "$mode" = fwd ] || [ "$mode" = bwd ]; then
    olddir=$(build_dir "${old:-}") || { note "$step: skipped, no build ${old:-}"; continue; }
  fi
  tag=$(echo "$new${old:+_$old}" | tr 'A-Z' 'a-z')
  t0=$(date +%s)
  case $mode in
    verify)
      ft=$newdir/flashtune
      n=0
      while read -r f; do
        n=$((n + 1))
        verify "${tag}_fwd$n" specs/flash_fwd_sm90.lua "$f"
      done < <(defaults_of flash_fwd_sm90 64 128 256)
      n=0
      while read -r f; do
        n=$((n + 1))
        verify "${tag}_bwd$n" specs/flash_bwd_sm90.lua "$f"
      done < <(defaults_of flash_bwd_sm90 64 128)
      n=0
      for only in ${VERIFY_EXTRA:-}; do
        n=$((n + 1))
        verify "${tag}_extra$n" specs/flash_bwd_sm90.lua "$only"
      done
      ;;
    sanitize)
      ft=$newdir/flashtune
      sanitize "${tag}_fwd256" specs/flash_fwd_sm90.lua "$(defaults_of flash_fwd_sm90 256 | grep 'causal=0' | head -1)"
      sanitize "${tag}_bwd128" specs/flash_bwd_sm90.lua "$(defaults_of flash_bwd_sm90 128 | grep 'causal=1' | head -1)"
      ;;
    fwd)
      interleave=--interleave
      [ "${AB_PROCESSES:-0}" = 1 ] && interleave=
      python3 bench/ab_libs.py "$newdir/libflashtune.so" "$olddir/libflashtune.so" --rounds "${AB_ROUNDS:-3}" \
        $interleave --json "$OUT/fwd_$tag.json" > "$OUT/fwd_$tag.txt" 2>&1
      note "ab_libs $new against $old: exit $? in $(since "$t0") s"
      tee -a "$summary" < "$OUT/fwd_$tag.txt"
      ;;
    bwd)
      twins=()
      for twin in ${BWD_TWINS:-}; do twins+=(--twin "$twin"); done
      FLASHTUNE_LIB=$newdir/libflashtune.so python3 bench/bwd_compare.py --head-dims "${BWD_DIMS:-64,128}" \
        --seqlens "${BWD_SEQLENS:-1024,4096,16384}" --dtypes bf16 --rounds "${AB_ROUNDS:-3}" \
        --systems flashtune,cuDNN --base-lib "$olddir/libflashtune.so" "${twins[@]}" --json "$OUT/bwd_$tag.json" \
        > "$OUT/bwd_$tag.txt" 2> "$OUT/bwd_$tag.err"
      note "bwd_compare $new (flashtune) against $old (flashtune base): exit $? in $(since "$t0") s"
      sed -n '/^type/,$p' "$OUT/bwd_$tag.txt" | tee -a "$summary"
      ;;
    *)
      note "$step: no such step (verify, sanitize, fwd, bwd)"
      ;;
  esac
done
