#!/bin/bash
# pack=1 balance 1/2 diagnosis (scratch; not committed)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/run_hold:/tmp/run_hold/deps
H=/tmp/run_hold/flashtune; S=/tmp/run_swap/flashtune
cp -r .dev/run_hold /tmp/run_hold; cp -r .dev/run_swap /tmp/run_swap; cp -r .dev/run_dbg /tmp/run_dbg; G=/tmp/run_dbg/flashtune
sed '148,149d' specs/flash_fwd_sm90.lua > specs/zz_nopack.lua
grep -c "one CTA a row block" specs/zz_nopack.lua
V() { echo "d=64,bm=192,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=0,balance=$1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=$2"; }
mkdir -p $OUT/d; cd_out=$OUT/d
run() { # name timeout bin cache spec only
  local n=$1 t=$2 b=$3 c=$4 sp=$5 o=$6; local t0=$(date +%s)
  FLASHTUNE_CACHE_DIR=$c timeout $t $b verify $sp -q --only "$o" > $cd_out/$n.txt 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s)-t0 ))s :: $(grep -E 'PASS|FAIL|pass |fail ' $cd_out/$n.txt | head -2 | cut -c140-300 | tr '\n' '|')" | tee -a $OUT/summary.txt
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/summary.txt
run A_p0b2 100 $H /tmp/c_h specs/flash_fwd_sm90.lua "$(V 2 0)"
run A_p0b1 100 $H /tmp/c_h specs/flash_fwd_sm90.lua "$(V 1 0)"
run B_p1b2 100 $H /tmp/c_h specs/zz_nopack.lua "$(V 2 1)"
run D_dbg_p1b2 100 $G /tmp/c_g specs/zz_nopack.lua "$(V 2 1)"
run D_dbg_p0b2 100 $G /tmp/c_g specs/zz_nopack.lua "$(V 2 0)"
grep -h DBG $cd_out/D_dbg_p1b2.txt | sort | uniq -c | head -24 >> $OUT/summary.txt
run C_swap_p1b2 100 $S /tmp/c_s specs/zz_nopack.lua "$(V 2 1)"
run C_swap_p0b2 100 $S /tmp/c_s specs/zz_nopack.lua "$(V 2 0)"
run C_swap_p1b1 100 $S /tmp/c_s specs/zz_nopack.lua "$(V 1 1)"
run C_swap_p0b1 100 $S /tmp/c_s specs/zz_nopack.lua "$(V 1 0)"
for tool in synccheck racecheck; do
  t0=$(date +%s)
  FLASHTUNE_CACHE_DIR=/tmp/c_h timeout 60 $(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer) --tool $tool --print-limit 20 $H verify specs/zz_nopack.lua -q --only "$(V 2 1)" > $cd_out/san_$tool.txt 2>&1
  echo "san_$tool rc=$? $(( $(date +%s)-t0 ))s :: $(grep -E 'ERROR SUMMARY|hazard' $cd_out/san_$tool.txt | head -2 | tr '\n' '|')" | tee -a $OUT/summary.txt
done
run E_pack128 100 $H /tmp/c_h specs/flash_fwd_sm90.lua d=64,bm=128,bn=128,stages=3,causal=1,dtype=bf16,pingpong=0,overlap=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=1
tar czf $OUT/d.tgz -C $OUT d && rm -rf $OUT/d
cat $OUT/summary.txt
