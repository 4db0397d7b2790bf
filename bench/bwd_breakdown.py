#!/usr/bin/env python3
"""Where a backward call's time goes: the device time of its pre, main and post kernels
(torch.profiler, 10 calls after 3 warm-up calls) on the grid's shapes (16k tokens, hidden 2048),
for the built-in defaults or one forced variant of a backward spec.

    python3 bench/bwd_breakdown.py --head-dim 128 --seqlens 512,1024,4096 \
        [--spec specs/flash_bwd_sm90.lua --variant bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0]
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402


def kind(name):
    if name.endswith("_pre"):
        return "pre"
    if name.endswith("_post"):
        return "post"
    return "main" if "flash_bwd" in name else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqlens", default="512,1024,4096")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    ap.add_argument("--spec", default=None)
    ap.add_argument("--variant", default=None)
    a = ap.parse_args()
    ctx = flashtune.Context(spec=a.spec, variant=a.variant)
    d, dtype = a.head_dim, {"bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    for s in (int(x) for x in a.seqlens.split(",")):
        for causal in (False, True):
            b, h = max(1, 16384 // s), 2048 // d
            q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
            o, lse = ctx.forward(q, k, v, causal=causal, return_lse=True)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            for _ in range(3):
                ctx.backward(q, k, v, o, lse, do, causal=causal, dq=dq, dk=dk, dv=dv)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    ctx.backward(q, k, v, o, lse, do, causal=causal, dq=dq, dk=dk, dv=dv)
                torch.cuda.synchronize()
            parts = {}
            for e in prof.key_averages():
                part = kind(e.key)
                if part is not None:
                    parts[part] = parts.get(part, 0.0) + e.device_time / 1000.0  # per call, ms
            total = sum(parts.values())
            print("d=%d s=%-5d causal=%d %s: %.3f ms per call: %s" % (
                d, s, causal, ctx.backward_kernel(q, k, v, causal=causal), total,
                ", ".join("%s %.3f (%.0f %%)" % (p, t, 100 * t / total) for p, t in sorted(parts.items()))),
                flush=True)


if __name__ == "__main__":
    main()
