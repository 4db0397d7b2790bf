#!/bin/bash
# Call 3 of the next GPU session (bench/staged/README.md): FA4 part 2, finish; with call 1's full tune (an H200) the
# forward bar (bf16, f16) with its winners and the backward bar, FA4 and cuDNN in the same run; then the grouped
# backward at d = 128 (group 8, then 4) against FA4 and cuDNN
set -u
t0=$(date +%s)
bash bench/fa4_install.sh stash .dev/fa4x2 > $OUT/fa4_stash2.txt 2>&1
bash bench/fa4_install.sh finish > $OUT/fa4_finish.txt 2>&1
echo "fa4: $(tail -1 $OUT/fa4_finish.txt) $(nvidia-smi --query-gpu=name --format=csv,noheader)" > $OUT/summary0.txt
export PYTHONPATH=/tmp/fa4-site:/tmp/fa4-site/nvidia_cutlass_dsl/dsl_packages
left() { echo $(( 560 - ($(date +%s) - t0) )); }
if [ -f /tmp/ft-full.db ]; then
  for dt in bf16 f16; do
    mkdir -p $OUT/fwd_$dt
    OUT=$OUT/fwd_$dt RUN=/tmp/run_hold HD8_DB=/tmp/ft-full.db HD8_DIMS=64,128,256 HD8_HIDDEN=2048 HD8_DTYPES=$dt HD8_TAG=$dt \
      timeout 110 bash bench/device_hd8.sh compare > /dev/null 2>&1
  done
  mkdir -p $OUT/bwd
  OUT=$OUT/bwd RUN=/tmp/run_hold timeout 170 bash bench/device_headdims_bwd.sh bar > /dev/null 2>&1
fi
for g in 8 4; do
  l=$(left); [ $l -lt 90 ] && break
  mkdir -p $OUT/g$g
  OUT=$OUT/g$g RUN=/tmp/run_hold GQA_CHECK=0 GQA_GROUP=$g GQA_DIMS=128 AB_ROUNDS=2 timeout $((l - 10)) bash bench/device_headdims_bwd.sh gqa > /dev/null 2>&1
done
echo "total $(( $(date +%s)-t0 )) s" >> $OUT/summary0.txt
cat $OUT/summary0.txt $OUT/*/summary.txt 2>/dev/null
