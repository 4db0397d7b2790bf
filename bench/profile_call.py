#!/usr/bin/env python3
"""One attention shape run a few times, for a profiler to watch (Nsight Compute on the GPU
machine): a warm-up call, then --calls calls of the forward or (--pass bwd, the default) the
backward, on the bench grid's shapes (16k tokens, hidden 2048). flashtune's: the built-in
defaults, or one forced variant of a spec (--spec, --variant); its kernels are named
ft_flash_fwd... and ft_flash_bwd... (the backward's pre, main and post kernels); or, --knobs, the
backward's built-in default for the shape with those knobs changed (forced through --spec, default
specs/flash_bwd_sm90.lua), as bench/bwd_compare.py's --twin makes it. Or, --system
fa4, FlashAttention-4's (flash_attn.cute): select its kernels by name, `--kernel-name
regex:Forward` or `regex:Backward` (the backward runs on autograd's thread, each call's three
kernels named ...BackwardPreprocess, ...BackwardSm90 and ...BackwardPostprocess); or --system
cudnn, PyTorch's SDPA held to its cuDNN backend (its kernels' names hold `cudnn`, on
PyTorch 2.11 with cuDNN 9.19 `cudnn_generated_fort_native_sdpa...`; `--kernel-name regex:sdpa|cudnn`).

    ncu --clock-control none --kernel-name regex:ft_flash_bwd --launch-skip 3 --launch-count 3 \\
        --section SpeedOfLight --section WarpStateStats python3 bench/profile_call.py --head-dim 128 \\
        --seqlen 8192 --causal 1 [--pass fwd] [--spec specs/flash_bwd_sm90.lua --variant bm=64,...]
        [--knobs bm=80,early_dv=2]

Prints which kernel ran (flashtune's dispatch reason) and the shape.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402


def fa4_call(q, k, v, do, causal, backward):
    from flash_attn.cute import flash_attn_func
    if not backward:
        return lambda: flash_attn_func(q, k, v, causal=causal)
    qf, kf, vf = (t.detach().requires_grad_() for t in (q, k, v))

    def call():
        o = flash_attn_func(qf, kf, vf, causal=causal)
        o = o[0] if isinstance(o, tuple) else o
        o.backward(do)
    return call


def cudnn_call(q, k, v, do, causal, backward):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt, dot = (t.transpose(1, 2) for t in (q, k, v, do))  # (b, h, s, d) views, as SDPA takes them
    if backward:
        qt, kt, vt = (t.detach().requires_grad_() for t in (qt, kt, vt))

    def call():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            if backward:
                o.backward(dot)
    return call


def flashtune_call(ctx, q, k, v, do, causal, backward):
    """The call and the name of the kernel it runs."""
    if not backward:
        return (lambda: ctx.forward(q, k, v, causal=causal)), ctx.kernel(q, k, v, causal=causal)
    o, lse = ctx.forward(q, k, v, causal=causal, return_lse=True)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    return ((lambda: ctx.backward(q, k, v, o, lse, do, causal=causal, dq=dq, dk=dk, dv=dv)),
            ctx.backward_kernel(q, k, v, causal=causal))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pass", dest="which", default="bwd", choices=("fwd", "bwd"))
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--spec", default=None)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--knobs", default=None,
                    help="backward: the shape's built-in default with these knobs (name=value,...) changed")
    ap.add_argument("--system", default="flashtune", choices=("flashtune", "fa4", "cudnn"))
    a = ap.parse_args()
    d, s, causal, backward = a.head_dim, a.seqlen, bool(a.causal), a.which == "bwd"
    b, h = max(1, 16384 // s), max(1, 2048 // d)  # the grid's shapes: 16k tokens, hidden 2048
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
    if a.system == "fa4":
        call, name = fa4_call(q, k, v, do, causal, backward), "FA4 flash_attn.cute"
    elif a.system == "cudnn":
        call, name = cudnn_call(q, k, v, do, causal, backward), "SDPA cuDNN"
    else:
        spec, variant = a.spec, a.variant
        if a.knobs:
            if not backward or variant:
                ap.error("--knobs changes the backward's default: not with --pass fwd or --variant")
            from bwd_compare import twin_variant  # the knobs changed as its --twin changes them
            how = flashtune.Context().backward_kernel(q, k, v, causal=causal)
            spec, variant = spec or "specs/flash_bwd_sm90.lua", twin_variant(how, a.knobs)
        call, name = flashtune_call(flashtune.Context(spec=spec, variant=variant), q, k, v, do, causal, backward)
    for _ in range(1 + a.calls):
        call()
    torch.cuda.synchronize()
    print("%s %s: b=%d h=%d s=%d d=%d causal=%d, %d calls" % (name, a.which, b, h, s, d, causal, 1 + a.calls))


if __name__ == "__main__":
    main()
