#!/usr/bin/env python3
"""One backward shape run a few times, for a profiler to watch (Nsight Compute on the GPU machine):
a warm-up call, then --calls calls of flashtune's backward (the built-in defaults, or one forced
variant of a backward spec), each its pre, main and post kernels; or, --system fa4,
FlashAttention-4's backward (flash_attn.cute through autograd, whose backward runs on another
thread: select its kernels by name, `--kernel-name regex:Backward`, each call's three kernels
named ...BackwardPreprocess, ...BackwardSm90 and ...BackwardPostprocess).

    ncu --clock-control none --kernel-name regex:bwd --launch-skip 3 --launch-count 3 \
        --section SpeedOfLight --section WarpStateStats python3 bench/bwd_profile.py --head-dim 128 \
        --seqlen 8192 --causal 1 [--spec specs/flash_bwd_sm90.lua --variant bm=64,...]
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
    b, h = max(1, 16384 // s), 2048 // d  # the grid's shapes: 16k tokens, hidden 2048
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
    if a.system == "fa4":
        from flash_attn.cute import flash_attn_func
        qf, kf, vf = (t.detach().requires_grad_() for t in (q, k, v))

        def backward():
            o = flash_attn_func(qf, kf, vf, causal=causal)
            o = o[0] if isinstance(o, tuple) else o
            o.backward(do)
        name = "FA4 flash_attn.cute"
    else:
        ctx = flashtune.Context(spec=a.spec, variant=a.variant)
        o, lse = ctx.forward(q, k, v, causal=causal, return_lse=True)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

        def backward():
            ctx.backward(q, k, v, o, lse, do, causal=causal, dq=dq, dk=dk, dv=dv)
        name = ctx.backward_kernel(q, k, v, causal=causal)
    for _ in range(1 + a.calls):
        backward()
    torch.cuda.synchronize()
    print("%s: b=%d h=%d s=%d d=%d causal=%d, %d calls" % (name, b, h, s, d, causal, 1 + a.calls))


if __name__ == "__main__":
    main()
