#!/usr/bin/env python3
"""One forward shape run a few times, for a profiler to watch (Nsight Compute on the GPU machine):
a warm-up call, then --calls calls of flashtune's forward (the built-in defaults, or one forced
variant of a forward spec; its kernels are named ft_flash_fwd...), or, --system fa4,
FlashAttention-4's forward (flash_attn.cute; select its kernel by name, `--kernel-name
regex:Forward`). The shapes are the bench grid's: 16k tokens, hidden 2048.

    ncu --clock-control none --kernel-name regex:ft_flash_fwd --launch-skip 2 --launch-count 1 \\
        --set full python3 bench/fwd_profile.py --head-dim 64 --seqlen 8192 --causal 0 \\
        [--spec specs/flash_fwd_sm90.lua --variant bm=192,bn=128,...]

Prints which kernel ran (flashtune's dispatch reason) and the shape.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--spec", default=None)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--system", default="flashtune", choices=("flashtune", "fa4"))
    a = ap.parse_args()
    d, s, causal = a.head_dim, a.seqlen, bool(a.causal)
    b, h = max(1, 16384 // s), max(1, 2048 // d)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(3))
    if a.system == "fa4":
        from flash_attn.cute import flash_attn_func

        def forward():
            return flash_attn_func(q, k, v, causal=causal)
        name = "FA4 flash_attn.cute"
    else:
        ctx = flashtune.Context(spec=a.spec, variant=a.variant)

        def forward():
            return ctx.forward(q, k, v, causal=causal)
        name = ctx.kernel(q, k, v, causal=causal)
    for _ in range(1 + a.calls):
        forward()
    torch.cuda.synchronize()
    print("%s: b=%d h=%d s=%d d=%d causal=%d, %d calls" % (name, b, h, s, d, causal, 1 + a.calls))


if __name__ == "__main__":
    main()
