#!/bin/bash
# The next pack call (staged 2026-12-08, not run: no GPU was lent): one flashtune run each, so that every
# answer is one shape: b0/b5/b6/b7 on the no-group shapes, b8 (each LSE writer's state as its LSE) with
# pack=1 and pack=0, b0 on each quick shape alone, memcheck on N; then the GPU tests of .dev/run_hold.
#   LIMIT=300 bash bench/results/h100-2026-12-07-pack2/scripts/diag4.sh   (carry .dev/run_b0 .dev/run_b5
#   .dev/run_b6 .dev/run_b7 .dev/run_b8 .dev/run_hold)
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-300}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)
S=$OUT/diag_summary.txt; echo "$name" > $S
mkdir -p $OUT/d
sed '/only once the GPU verifies them/,+1d' specs/flash_fwd_sm90.lua > specs/zz_pack.lua
F="pingpong=0,psmem=0,pexp=0,skip_rescale=0,early_rescale=0,ctas=1"
E="d=64,bm=128,bn=128,stages=3,causal=1,dtype=bf16,overlap=1,balance=0,ostore=0,$F,pack=1"
N="d=64,bm=64,bn=80,stages=2,causal=0,dtype=bf16,overlap=0,balance=0,ostore=0,$F,pack=1"
r() { # r TAG BUILD VARIANT SHAPE [run options]
  local tag=$1 b=$2 v=$3 sh=$4; shift 4
  FLASHTUNE_CACHE_DIR=/tmp/c_$b timeout 25 .dev/run_$b/flashtune run --spec specs/zz_pack.lua --variant "$v" --shape "$sh" --dtype bf16 --no-time "$@" > $OUT/d/$tag.txt 2>&1
  echo "$tag rc=$? :: $(tail -1 $OUT/d/$tag.txt | cut -c1-40) .. $(tail -1 $OUT/d/$tag.txt | grep -o 'on b=.*' | cut -c1-160)" >> $S
}
for b in b0 b5 b6 b7; do
  r ${b}_E $b "$E" b=1,hq=1,sq=1,sk=1,d=64 --causal
  r ${b}_N $b "$N" b=1,hq=1,sq=4097,sk=4097,d=64
done
for pk in 1 0; do
  r b8_p${pk}_s1 b8 "${E%,pack=1},pack=$pk" b=1,hq=1,sq=1,sk=1,d=64 --causal
  r b8_p${pk}_s2 b8 "${E%,pack=1},pack=$pk" b=1,hq=1,sq=2,sk=2,d=64 --causal
done
i=0
for sh in b=2,hq=3,sq=17,sk=17:bhsd b=1,hq=2,sq=127,sk=1000 b=1,hq=2,sq=1000,sk=127 b=2,hq=8,hkv=1,sq=257,sk=200 \
    b=2,hq=4,sq=300,sk=300:qkv b=1,hq=2,sq=513,sk=513 b=1,hq=1,sq=4097,sk=4097 b=2,hq=8,hkv=2,sq=1,sk=5000 b=1,hq=16,hkv=2,sq=3,sk=2049:bhsd \
    b=3,hq=4,sq=16,sk=777 b=1,hq=32,hkv=2,sq=300,sk=333:bhsd; do
  lay=bshd; case $sh in *:*) lay=${sh#*:}; sh=${sh%:*};; esac
  i=$((i + 1)); r b0_E_shape$i b0 "$E" $sh,d=64 --layout $lay --causal
done
FLASHTUNE_CACHE_DIR=/tmp/c_b0 timeout 45 compute-sanitizer --tool memcheck --print-limit 5 .dev/run_b0/flashtune run --spec specs/zz_pack.lua --variant "$N" --shape b=1,hq=1,sq=4097,sk=4097,d=64 --dtype bf16 --no-time > $OUT/d/memcheck_N.txt 2>&1
echo "memcheck N rc=$? :: $(grep -m4 -E 'Invalid|ERROR SUMMARY|at .*ft_flash|Address' $OUT/d/memcheck_N.txt | cut -c1-160 | tr '\n' '|')" >> $S
echo "diag done at $(( $(date +%s)-t0 )) s" >> $S
mkdir -p /tmp/run_hold && cp -a .dev/run_hold/. /tmp/run_hold/
el=$(( $(date +%s)-t0 ))
RUN=/tmp/run_hold GPU_TESTS="test_public_backward" timeout $((LIMIT - el)) bash bench/device_headdims_bwd.sh tests > /dev/null 2>&1
echo "total $(( $(date +%s)-t0 )) s" >> $OUT/summary.txt
tar czf $OUT/d.tgz -C $OUT d && rm -rf $OUT/d
cat $S $OUT/summary.txt
