#!/bin/sh
# Verifies a representative set of variants on the GPU through the command: forward ones, and
# backward ones (every causality, dtype, GQA mode and determinism of two tile shapes, and at
# d = 144 in fp16 one of each family, whose one-key shape failed a bound built on |dP| + |D|);
# "skipped" (status 77) on a machine without one. (The sm_90a forward's pack=1, which its spec
# keeps out until the GPU verifies it, is bench/device_hd8.sh pack's to check.)
#   gpu_verify.sh path/to/flashtune
ft=$1
if ! "$ft" devices --gpus-only >/dev/null 2>&1; then
  echo "skipped: no GPU ($("$ft" devices --gpus-only 2>&1 | head -n 1))"
  exit 77
fi
"$ft" verify specs/flash_fwd.lua -q --only "${FT_VERIFY_ONLY:-bm=128,bn=64,stages=2}" || exit 1
for only in ${FT_VERIFY_BWD_ONLY:-d=128,bm=64,bn=128,warps=8,split=1,stages=2 d=64,bm=32,bn=128,warps=4,split=1,stages=1}; do
  "$ft" verify specs/flash_bwd.lua -q --only "$only" || exit 1
done
"$ft" verify specs/flash_bwd.lua -q --only d=144,bm=64,bn=64,warps=8,split=2,stages=1,dtype=f16,gqa=loop,det=0 || exit 1
if "$ft" devices --gpus-only 2>/dev/null | grep -q 'sm_90'; then
  "$ft" verify specs/flash_bwd_sm90.lua -q --only d=144,bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0,dtype=f16 || exit 1
fi
