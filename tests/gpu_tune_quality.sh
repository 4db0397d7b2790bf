#!/bin/sh
# The tuner's bars on the GPU (bench/tune_quality.py --check): on the six buckets of one group
# of the forward (d = 128, bf16, causal; sm_90a's spec on compute capability 9.0, else sm80's),
# the ranked search's winner within 2 % of the exhaustive tune's, never slower than the built-in
# default beyond the re-measurement's own spread, its recorded median within 3 % of an
# independent interleaved measurement. "skipped" (status 77) without a GPU or PyTorch.
#   gpu_tune_quality.sh path/to/flashtune
ft=$1
if ! "$ft" devices --gpus-only >/dev/null 2>&1; then
  echo "skipped: no GPU ($("$ft" devices --gpus-only 2>&1 | head -n 1))"
  exit 77
fi
cc=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(); print(m * 10 + n)' 2>/dev/null) || {
  echo "skipped: no PyTorch with CUDA"
  exit 77
}
if [ "$cc" -ge 90 ]; then
  spec=specs/flash_fwd_sm90.lua only=d=128,dtype=bf16,causal=1,bm=128,stages=2
else
  spec=specs/flash_fwd.lua only=d=128,dtype=bf16,causal=1,stages=2
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$(dirname "$0")/../bench/tune_quality.py" --flashtune "$ft" --spec "$spec" --only "$only" --search ranked \
  --rounds 3 --reps 10 --out "$dir" --check
