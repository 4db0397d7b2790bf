#!/bin/sh
# The source `flashtune gen` prints compiles on its own with nvcc.
#   gen_nvcc.sh path/to/flashtune path/to/nvcc
set -eu
ft=$1; nvcc=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for v in 'd=128,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0' \
         'd=96,bm=64,bn=32,warps=4,stages=3,causal=0,dtype=bf16,qreg=1,overlap=0'; do
  "$ft" gen specs/flash_fwd.lua --variant "$v" > "$dir/k.cu"
  "$nvcc" -arch=sm_80 -c "$dir/k.cu" -o "$dir/k.o"
  echo "nvcc compiled $v"
done
