#!/bin/sh
# FT_DESC64 (templates/include/ft_sm90.cuh; 0 unless defined): the wgmma descriptors as one
# 64-bit base per tile and operand layout, and a constant added for each k-step, instead of
# the low word rebuilt from the tile's address and the high word set again for every wgmma.
# The descriptors' bits are the same either way; what changes is the code. For the forward's
# and the backward's d = 128 defaults, compiled with nvcc for sm_90a both ways: the same
# HGMMA in each main loop, no spills, and with FT_DESC64=1 fewer instructions a trip of every
# main loop (bench/sass_loops.py). Without a disassembler the SASS comparison is left out, and
# the script says so.
#   desc64_sass.sh path/to/flashtune path/to/nvcc
set -eu
ft=$1; nvcc=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "desc64_sass: $*"; exit 1; }

bindir=$(dirname "$nvcc")
nvdisasm=${NVDISASM:-}
[ -n "$nvdisasm" ] && [ -x "$nvdisasm" ] || nvdisasm=$bindir/nvdisasm
[ -x "$nvdisasm" ] || nvdisasm=$(command -v nvdisasm 2>/dev/null || true)

set -- \
  flash_fwd_sm90 'd=128,bm=128,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=1,balance=0,ostore=1' \
  flash_bwd_sm90 'd=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,dtype=bf16'
checked=0
while [ $# -ge 2 ]; do
  spec=$1; v=$2; shift 2
  "$ft" gen "$spec" --arch sm_90a --variant "$v" > "$dir/k.cu" 2> "$dir/gen.err" ||
    { cat "$dir/gen.err"; fail "gen failed for $spec $v"; }
  for x in 0 1; do
    "$nvcc" -arch=sm_90a -cubin -Xptxas -v -DFT_DESC64=$x "$dir/k.cu" -o "$dir/k$x.cubin" > "$dir/ptxas$x.log" 2>&1 ||
      { cat "$dir/ptxas$x.log"; fail "nvcc failed for $spec $v with FT_DESC64=$x"; }
    grep -q 'bytes spill stores' "$dir/ptxas$x.log" || { cat "$dir/ptxas$x.log"; fail "no spill report from ptxas"; }
    if grep -q -E ' [1-9][0-9]* bytes spill (stores|loads)' "$dir/ptxas$x.log"; then
      cat "$dir/ptxas$x.log"; fail "$spec $v spills with FT_DESC64=$x"
    fi
  done
  if [ -z "$nvdisasm" ]; then
    continue
  fi
  for x in 0 1; do
    NVDISASM=$nvdisasm python3 bench/sass_loops.py --json "$dir/loops$x.json" "$dir/k$x.cubin" > "$dir/loops$x.txt" ||
      { cat "$dir/loops$x.txt"; fail "no main loop found in $spec $v (FT_DESC64=$x)"; }
  done
  python3 - "$dir/loops0.json" "$dir/loops1.json" "$spec" <<'EOF' || fail "$spec $v: see above"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if len(a) != len(b) or not a:
    sys.exit("%d main loops with FT_DESC64=0, %d with 1" % (len(a), len(b)))
for x, y in zip(a, b):
    if x["hgmma"] != y["hgmma"] or abs(x["mflop"] - y["mflop"]) > 1e-9:
        sys.exit("a loop's HGMMA differ: %d against %d" % (x["hgmma"], y["hgmma"]))
    if not y["instructions"] < x["instructions"]:
        sys.exit("a loop issues %d instructions a trip with FT_DESC64=1, %d without" % (y["instructions"], x["instructions"]))
    print("%s: a trip of %d HGMMA, %d instructions (%d uniform) with FT_DESC64=1 against %d (%d)"
          % (sys.argv[3], x["hgmma"], y["instructions"], y["groups"]["uniform"], x["instructions"], x["groups"]["uniform"]))
EOF
  checked=$((checked + 1))
done
if [ "$checked" -gt 0 ]; then
  echo "desc64_sass: SASS compared for $checked kernels"
else
  echo "desc64_sass: compiled both ways without spills; SASS comparison left out: no nvdisasm here (set NVDISASM)"
fi
