#!/bin/bash
# The sm_90a templates' code changes that are off until timed (FT_DESC64, FT_QW, FT_HOLD_BASE;
# bench/NOTES.md, fifteenth and sixteenth stops), on the GPU machine, from three staged builds
# (bench/stage_run.sh): BASE (all off, default .dev/run), DESC (FT_DESC64 on, default
# .dev/run_desc64) and ALL (FT_DESC64, the forward's FT_QW and the backward's FT_HOLD_BASE on,
# default .dev/run_all). One mode a call:
#   bash bench/device_macros.sh verify   flashtune verify, with DESC and with ALL, of the
#                                        built-in defaults of the sm_90a forward at d = 64, 128 and
#                                        256 and of the sm_90a backward at d = 64 and 128 (bf16,
#                                        causal both ways: 11 kernels, each alone); compute-
#                                        sanitizer on ALL's d = 256 non-causal forward default and
#                                        d = 128 causal backward default
#   bash bench/device_macros.sh fwd      bench/ab_libs.py: DESC against BASE, then ALL against
#                                        DESC (the forward's defaults, 18 shapes, AB_ROUNDS rounds,
#                                        default 3); no anchor in it: the question is the change,
#                                        and the anchors come with the bar's run after
#   bash bench/device_macros.sh bwd      bench/bwd_compare.py with DESC as flashtune and BASE as
#                                        'flashtune base', cuDNN interleaved, d = 64 and 128 bf16,
#                                        BWD_SEQLENS (default 1024,4096,16384), AB_ROUNDS rounds;
#                                        then ALL against DESC the same way
# Logs and JSON under $OUT (default /tmp/ft-out), a line a step in $OUT/summary.txt.
set -u
cd "$(dirname "$0")/.."
BASE=$(cd "${BASE:-.dev/run}" && pwd)
DESC=$(cd "${DESC:-.dev/run_desc64}" && pwd)
ALL=$(cd "${ALL:-.dev/run_all}" && pwd)
RUN=$DESC
source bench/device_common.sh
mode=${1:-}

# The built-in defaults of SPEC at the head dims given, one full variant a line.
defaults_of() {
  sh bench/sm90_defaults.sh "$BASE/flashtune" "$@"
}

case $mode in
  verify)
    for build in DESC ALL; do
      ft=${!build}/flashtune
      n=0
      while read -r f; do
        n=$((n + 1))
        verify "${build}_fwd$n" specs/flash_fwd_sm90.lua "$f"
      done < <(defaults_of flash_fwd_sm90 64 128 256)
      n=0
      while read -r f; do
        n=$((n + 1))
        verify "${build}_bwd$n" specs/flash_bwd_sm90.lua "$f"
      done < <(defaults_of flash_bwd_sm90 64 128)
    done
    ft=$ALL/flashtune
    sanitize all_fwd256 specs/flash_fwd_sm90.lua "$(defaults_of flash_fwd_sm90 256 | grep 'causal=0' | head -1)"
    sanitize all_bwd128 specs/flash_bwd_sm90.lua "$(defaults_of flash_bwd_sm90 128 | grep 'causal=1' | head -1)"
    ;;
  fwd)
    t0=$(date +%s)
    python3 bench/ab_libs.py "$DESC/libflashtune.so" "$BASE/libflashtune.so" --rounds "${AB_ROUNDS:-3}" \
      --json "$OUT/ab_desc_base.json" > "$OUT/ab_desc_base.txt" 2>&1
    note "ab_libs DESC against BASE: exit $? in $(since "$t0") s"
    tee -a "$summary" < "$OUT/ab_desc_base.txt"
    t0=$(date +%s)
    python3 bench/ab_libs.py "$ALL/libflashtune.so" "$DESC/libflashtune.so" --rounds "${AB_ROUNDS:-3}" \
      --json "$OUT/ab_all_desc.json" > "$OUT/ab_all_desc.txt" 2>&1
    note "ab_libs ALL against DESC: exit $? in $(since "$t0") s"
    tee -a "$summary" < "$OUT/ab_all_desc.txt"
    ;;
  bwd)
    t0=$(date +%s)
    python3 bench/bwd_compare.py --head-dims 64,128 --seqlens "${BWD_SEQLENS:-1024,4096,16384}" --dtypes bf16 \
      --rounds "${AB_ROUNDS:-3}" --systems flashtune,cuDNN --base-lib "$BASE/libflashtune.so" \
      --json "$OUT/bwd_desc_base.json" > "$OUT/bwd_desc_base.txt" 2> "$OUT/bwd_desc_base.err"
    note "bwd_compare DESC (flashtune) against BASE (flashtune base): exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/bwd_desc_base.txt" | tee -a "$summary"
    t0=$(date +%s)
    FLASHTUNE_LIB=$ALL/libflashtune.so python3 bench/bwd_compare.py --head-dims 64,128 \
      --seqlens "${BWD_SEQLENS:-1024,4096,16384}" --dtypes bf16 --rounds "${AB_ROUNDS:-3}" --systems flashtune,cuDNN \
      --base-lib "$DESC/libflashtune.so" --json "$OUT/bwd_all_desc.json" > "$OUT/bwd_all_desc.txt" 2> "$OUT/bwd_all_desc.err"
    note "bwd_compare ALL (flashtune) against DESC (flashtune base): exit $? in $(since "$t0") s"
    sed -n '/^type/,$p' "$OUT/bwd_all_desc.txt" | tee -a "$summary"
    ;;
  *)
    echo "usage: bash bench/device_macros.sh verify | fwd | bwd" >&2
    exit 2
    ;;
esac
