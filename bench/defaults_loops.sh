#!/bin/bash
# Every sm_90a built-in default (bench/sm90_defaults.sh: bf16, both causal settings where one
# default serves both), compiled by nvcc for sm_90a once per set of defines: registers of each kernel,
# spill bytes, and one trip of each main loop (instructions / HGMMA, bench/sass_loops.py). No GPU.
# Used to see what a template change does to every default's code before it is timed.
#   bash bench/defaults_loops.sh [BUILD_DIR] -- "-DFT_DESC64=0" "-DFT_DESC64=1"
# BUILD_DIR (default build) holds the flashtune binary; nvcc from $NVCC, PATH or
# /usr/local/cuda/bin; nvdisasm as bench/sass_loops.py finds it.
set -eu
cd "$(dirname "$0")/.."
build=build
if [ $# -gt 0 ] && [ "$1" != -- ]; then build=$1; shift; fi
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || set -- ""
ft=$build/flashtune
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$ft" ] || { echo "defaults_loops: no $ft (build first, or name the build folder)" >&2; exit 2; }
[ -x "$nvcc" ] || { echo "defaults_loops: no nvcc (set NVCC)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

for spec in flash_fwd_sm90 flash_bwd_sm90; do
  sh bench/sm90_defaults.sh "$ft" "$spec" | sed "s/^/$spec /"
done |
while read -r spec v; do
  "$ft" gen "$spec" --arch sm_90a --variant "$v" > "$dir/k.cu" 2> "$dir/gen.err" ||
    { echo "$spec $v: gen failed: $(head -1 "$dir/gen.err")"; continue; }
  line="$spec $v"
  for defs in "$@"; do
    # shellcheck disable=SC2086
    if ! "$nvcc" -arch=sm_90a -cubin -Xptxas -v $defs "$dir/k.cu" -o "$dir/k.cubin" > "$dir/ptxas.log" 2>&1; then
      line="$line | ${defs:-as is}: nvcc failed"
      continue
    fi
    regs=$(sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' "$dir/ptxas.log" | paste -sd/)
    spill=$(sed -n 's/.* \([0-9]*\) bytes spill stores.*/\1/p' "$dir/ptxas.log" | awk '{s += $1} END {print s + 0}')
    loops=$(python3 bench/sass_loops.py --json "$dir/loops.json" "$dir/k.cubin" > /dev/null 2>&1 &&
      python3 -c "import json, sys; print(' '.join('%d/%d' % (l['instructions'], l['hgmma']) for l in json.load(open(sys.argv[1]))))" "$dir/loops.json" ||
      echo none)
    line="$line | ${defs:-as is}: registers $regs, spills $spill B, loop trips $loops"
  done
  echo "$line"
done
