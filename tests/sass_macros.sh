#!/bin/sh
# Code changes of the sm_90a templates behind macros (timed in bench/results/h100-2026-12-06-macros/;
# FT_HOLD_BASE on by default, the other two off: the templates say why), each compiled both ways
# by nvcc for sm_90a (bench/sass_loops.py reads the main loops):
# - FT_DESC64 (templates/include/ft_sm90.cuh): the wgmma descriptors as one 64-bit base per tile
#   and layout plus a constant for each k-step, instead of the low word rebuilt from the tile's
#   address and the high word set again for every wgmma; the same bits either way. For the
#   forward's and the backward's d = 128 defaults: the same HGMMA in each main loop, no spills,
#   and fewer instructions a trip of every main loop with it.
# - FT_QW (templates/flash_fwd_sm90.cuh, Consumer::sq): this warpgroup's Q offset held instead
#   of rebuilt from %tid.x. For the forward's d = 128 and d = 256 defaults (with FT_DESC64): no
#   spills, the same HGMMA, fewer instructions before a trip's first HGMMA in the steady loop.
# - FT_HOLD_BASE (templates/flash_bwd_sm90.cuh, consume): the shared-memory base held instead of
#   rebuilt from the CTA's shared window at every trip. For the backward's d = 128 default, as
#   shipped (FT_DESC64 off) and with FT_DESC64: no spills, the same HGMMA, fewer instructions a
#   trip and before its first HGMMA.
# Without a disassembler the SASS comparisons are left out, and the script says so.
#   sass_macros.sh path/to/flashtune path/to/nvcc
set -eu
ft=$1; nvcc=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "sass_macros: $*"; exit 1; }

# The disassembler bench/sass_loops.py reads cubins with ($NVDISASM, PATH, the toolkit's, the
# copy scripts/setup.sh fetches); none: the SASS comparisons are left out.
nvdisasm=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import sass_loops; print(sass_loops.find_nvdisasm() or "")')

# compile SPEC VARIANT NAME DEFINES...: $dir/NAME.cubin, failing on an error or a spill
compile() {
  spec=$1; v=$2; name=$3; shift 3
  "$ft" gen "$spec" --arch sm_90a --variant "$v" > "$dir/k.cu" 2> "$dir/gen.err" ||
    { cat "$dir/gen.err"; fail "gen failed for $spec $v"; }
  "$nvcc" -arch=sm_90a -cubin -Xptxas -v "$@" "$dir/k.cu" -o "$dir/$name.cubin" > "$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log"; fail "nvcc failed for $spec $v with $*"; }
  grep -q 'bytes spill stores' "$dir/$name.log" || { cat "$dir/$name.log"; fail "no spill report from ptxas"; }
  if grep -q -E ' [1-9][0-9]* bytes spill (stores|loads)' "$dir/$name.log"; then
    cat "$dir/$name.log"; fail "$spec $v spills with $*"
  fi
}

# loops NAME: $dir/NAME.json, the main loops of $dir/NAME.cubin
loops() {
  python3 bench/sass_loops.py --json "$dir/$1.json" "$dir/$1.cubin" > "$dir/$1.txt" ||
    { cat "$dir/$1.txt"; fail "no main loop found in $1"; }
}

# compare WHAT A B LABEL: every loop (trip) of B has A's HGMMA and fewer instructions (WHAT =
# trip) or fewer before its first HGMMA (WHAT = lead; the steady loop only: the last found)
compare() {
  python3 - "$1" "$dir/$2.json" "$dir/$3.json" "$4" << 'PY'
import json, sys
what, pa, pb, label = sys.argv[1:5]
a, b = json.load(open(pa)), json.load(open(pb))
if len(a) != len(b) or not a:
    sys.exit("%s: %d main loops against %d" % (label, len(b), len(a)))
if what == "lead":
    a, b = a[-1:], b[-1:]
for x, y in zip(a, b):
    if x["hgmma"] != y["hgmma"] or abs(x["mflop"] - y["mflop"]) > 1e-9:
        sys.exit("%s: a loop's HGMMA differ: %d against %d" % (label, y["hgmma"], x["hgmma"]))
    key = "instructions" if what == "trip" else "lead"
    if not y[key] < x[key]:
        sys.exit("%s: %d %s against %d" % (label, y[key], key, x[key]))
    print("%s: a trip of %d HGMMA, %d instructions, %d before the first HGMMA (against %d, %d)"
          % (label, y["hgmma"], y["instructions"], y["lead"], x["instructions"], x["lead"]))
PY
}

# both SPEC VARIANT MACRO "WHAT..." "DEFINES OFF" "DEFINES ON": VARIANT compiled both ways, and
# where SASS can be read each WHAT (trip, lead) compared: fewer with the macro on
checked=0
both() {
  # shellcheck disable=SC2086 # the defines are words
  compile "$1" "$2" off $5
  # shellcheck disable=SC2086
  compile "$1" "$2" on $6
  [ -n "$nvdisasm" ] || return 0
  loops off
  loops on
  for what in $4; do
    compare "$what" off on "$1 $3" || fail "$2: see above"
  done
  checked=$((checked + 1))
}

fwd128='d=128,bm=128,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,ostore=1'
fwd256='d=256,bm=128,bn=80,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,ostore=1'
bwd128='d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,dtype=bf16'
both flash_fwd_sm90 "$fwd128" FT_DESC64 trip "-DFT_DESC64=0" "-DFT_DESC64=1"
both flash_bwd_sm90 "$bwd128" FT_DESC64 trip "-DFT_DESC64=0 -DFT_HOLD_BASE=0" "-DFT_DESC64=1 -DFT_HOLD_BASE=0"
both flash_fwd_sm90 "$fwd128" FT_QW lead "-DFT_DESC64=1 -DFT_QW=0" "-DFT_DESC64=1 -DFT_QW=1"
both flash_fwd_sm90 "$fwd256" FT_QW lead "-DFT_DESC64=1 -DFT_QW=0" "-DFT_DESC64=1 -DFT_QW=1"
both flash_bwd_sm90 "$bwd128" FT_HOLD_BASE "trip lead" "-DFT_DESC64=0 -DFT_HOLD_BASE=0" "-DFT_DESC64=0 -DFT_HOLD_BASE=1"
both flash_bwd_sm90 "$bwd128" "FT_HOLD_BASE (with FT_DESC64)" "trip lead" "-DFT_DESC64=1 -DFT_HOLD_BASE=0" "-DFT_DESC64=1 -DFT_HOLD_BASE=1"

if [ "$checked" -gt 0 ]; then
  echo "sass_macros: SASS compared for $checked kernels"
else
  echo "sass_macros: compiled both ways without spills; SASS comparisons left out: no nvdisasm here (set NVDISASM)"
fi
