#!/bin/sh
# Compares the SASS of the generator's sources of the harness's variants with that of the same
# variants built from another text of the template (one without shared headers, say), for
# sm_80 and sm_90, with nvcc and cuobjdump: a refactoring of the template that leaves the SASS
# as it was leaves the GPU results of tests/bwd as they were. No GPU needed.
#
#   sh tests/bwd/same_sass.sh FLASHTUNE OLD_TEMPLATE
#   e.g.  git show 0f258e2:templates/flash_bwd_sm80.cuh > /tmp/old.cuh
#         sh tests/bwd/same_sass.sh build/flashtune /tmp/old.cuh
set -eu
ft=$1 old=$2
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=${NVCC:-$cuda/bin/nvcc}
objdump=${CUOBJDUMP:-$(command -v cuobjdump || ls "${FT_TOOLS_DIR:-$HOME/.cache/flashtune/tools}"/nvidia/*/bin/cuobjdump 2>/dev/null | head -n 1)}
[ -x "$objdump" ] || { echo "same_sass: no cuobjdump (set CUOBJDUMP)"; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0 same=0
while read -r name d bm bn w sp st c dt g det; do
  [ -n "$name" ] || continue
  v="d=$d,bm=$bm,bn=$bn,warps=$w,split=$sp,stages=$st,causal=$c,dtype=$dt,gqa=$g,det=$det"
  "$ft" gen specs/flash_bwd.lua --variant "$v" > "$dir/$name.new.cu"
  # the same parameters and entry point around the other text
  { grep -E '^#define (FTP_|FT_SMEM_BYTES)' "$dir/$name.new.cu"; cat "$old"; tail -n 1 "$dir/$name.new.cu"; } \
    > "$dir/$name.old.cu"
  for arch in sm_80 sm_90; do
    for k in old new; do
      "$nvcc" -std=c++17 -O3 -cubin -arch=$arch -I"$(dirname "$old")" -o "$dir/$k.cubin" "$dir/$name.$k.cu"
      "$objdump" -sass "$dir/$k.cubin" | grep -v -E 'code for|Function :|^[[:space:]]*$|\.headerflags|arch = ' \
        > "$dir/$k.sass"
    done
    n=$((n + 1))
    if cmp -s "$dir/old.sass" "$dir/new.sass"; then
      same=$((same + 1))
    else
      echo "differs: $name $arch $v"
    fi
  done
done <<L
$(grep -v '^#' tests/bwd/variants.txt)
L
echo "same_sass: identical SASS for $same of $n (variant, target)"
[ "$same" -eq "$n" ]
