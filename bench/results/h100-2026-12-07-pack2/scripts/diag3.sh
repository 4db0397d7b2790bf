#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
sed '/only once the GPU verifies them/,+1d' specs/flash_fwd_sm90.lua > specs/zz_pack.lua
grep -c 'v.pack == 0 end' specs/zz_pack.lua
F="pingpong=0,psmem=0,pexp=0,skip_rescale=0,early_rescale=0,ctas=1,pack=1"
E="d=64,bm=128,bn=128,stages=3,causal=1,dtype=bf16,overlap=1,balance=0,ostore=0,$F"
N="d=64,bm=64,bn=80,stages=2,causal=0,dtype=bf16,overlap=0,balance=0,ostore=0,$F"
B2="d=64,bm=192,bn=128,stages=2,causal=1,dtype=bf16,overlap=0,balance=2,ostore=0,$F"
mkdir -p $OUT/d
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/summary.txt
for b in b0 b5 b6; do
  for v in E N B2; do
    t0=$(date +%s)
    FLASHTUNE_CACHE_DIR=/tmp/c_$b timeout 30 .dev/run_$b/flashtune verify specs/zz_pack.lua -q --only "${!v}" > $OUT/d/${b}_$v.txt 2>&1
    echo "$b $v rc=$? $(( $(date +%s)-t0 ))s :: $(grep -E ' pass | FAIL | skip ' $OUT/d/${b}_$v.txt | cut -c150-400 | head -1) $(grep -o 'CUDA_ERROR[A-Z_]*' $OUT/d/${b}_$v.txt | head -1)" >> $OUT/summary.txt
  done
done
# b7: the consumers trap where the slot's pack field reads other than 0; one shape without groups each
for b in b0 b5 b6 b7; do
  FLASHTUNE_CACHE_DIR=/tmp/c_$b timeout 30 .dev/run_$b/flashtune run --spec specs/zz_pack.lua --variant "$E" \
    --shape b=1,hq=1,sq=1,sk=1,d=64 --causal --dtype bf16 --no-time > $OUT/d/run_${b}_E.txt 2>&1
  echo "run $b E rc=$? :: $(tail -1 $OUT/d/run_${b}_E.txt | cut -c1-220)" >> $OUT/summary.txt
  FLASHTUNE_CACHE_DIR=/tmp/c_$b timeout 30 .dev/run_$b/flashtune run --spec specs/zz_pack.lua --variant "$N" \
    --shape b=1,hq=1,sq=4097,sk=4097,d=64 --dtype bf16 --no-time > $OUT/d/run_${b}_N.txt 2>&1
  echo "run $b N rc=$? :: $(tail -1 $OUT/d/run_${b}_N.txt | cut -c1-220)" >> $OUT/summary.txt
done
FLASHTUNE_CACHE_DIR=/tmp/c_b0 timeout 50 compute-sanitizer --tool memcheck --print-limit 5 .dev/run_b0/flashtune verify specs/zz_pack.lua -q --only "$N" > $OUT/d/memcheck_N.txt 2>&1
echo "memcheck N rc=$? :: $(grep -m3 -E 'Invalid|ERROR SUMMARY|at ft_' $OUT/d/memcheck_N.txt | cut -c1-200 | tr '\n' '|')" >> $OUT/summary.txt
tar czf $OUT/d.tgz -C $OUT d && rm -rf $OUT/d
cat $OUT/summary.txt
