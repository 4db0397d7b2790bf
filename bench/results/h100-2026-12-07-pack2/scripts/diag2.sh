#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/tmp/run_hold:/tmp/run_hold/deps
rm -rf /tmp/run_hold /tmp/run_dbg; cp -r .dev/run_hold /tmp/run_hold; cp -r .dev/run_dbg /tmp/run_dbg
H=/tmp/run_hold/flashtune; G=/tmp/run_dbg/flashtune
sed '/only without the causal mask/,+1d' specs/flash_fwd_sm90.lua > specs/zz_nopack.lua; grep -c 'v.causal == 0 end' specs/zz_nopack.lua
V128() { echo "d=64,bm=128,bn=128,stages=3,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=$1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=$2"; }
V192() { echo "d=64,bm=192,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=0,balance=$1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=$2"; }
mkdir -p $OUT/d; D=$OUT/d; export FLASHTUNE_CACHE_DIR=/tmp/c2
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/summary.txt
R() { local n=$1 b=$2 v=$3 s=$4; timeout 60 $b run --spec specs/zz_nopack.lua --variant "$v" --shape "$s" --causal --dtype bf16 --no-time > $D/$n.txt 2>&1; echo "== $n rc=$?" >> $OUT/summary.txt; grep -v "^DBG" $D/$n.txt | tail -3 >> $OUT/summary.txt; grep "^DBG" $D/$n.txt | sort | head -40 >> $OUT/summary.txt; }
R g128p1 $G "$(V128 0 1)" b=1,hq=1,sq=1,sk=1,d=64
R g128p0 $G "$(V128 0 0)" b=1,hq=1,sq=1,sk=1,d=64
R h128p1 $H "$(V128 0 1)" b=1,hq=1,sq=1,sk=1,d=64
R h128p1s2 $H "$(V128 0 1)" b=1,hq=1,sq=2,sk=2,d=64
R g192b2p1 $G "$(V192 2 1)" b=1,hq=1,sq=1,sk=1,d=64
R g192b0p1 $G "$(V192 0 1)" b=1,hq=1,sq=1,sk=1,d=64
for c in 1 0; do
  t0=$(date +%s)
  timeout 200 $H verify specs/zz_nopack.lua -q --json --only "d=64,causal=$c,dtype=bf16,pack=1,pingpong=0,psmem=0,pexp=0,skip_rescale=0,early_rescale=0,ctas=1,stages=2,overlap=0,ostore=0" > $D/sweep_c$c.json 2>$D/sweep_c$c.err
  echo "== sweep causal=$c rc=$? $(( $(date +%s)-t0 ))s" >> $OUT/summary.txt
  python3 -c "
import json,sys
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except Exception: continue
    v=j.get('variant','')
    if v: print(j.get('result'), v.split(',')[1], v.split(',')[2], j.get('first_failure', j.get('failure',''))[:120])
    else: print(l.strip()[:200])
" $D/sweep_c$c.json >> $OUT/summary.txt
done
tar czf $OUT/d.tgz -C $OUT d && rm -rf $OUT/d
cat $OUT/summary.txt
