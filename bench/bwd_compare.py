#!/usr/bin/env python3
"""The backward (and forward + backward) side by side on one GPU: flashtune's against PyTorch's
scaled_dot_product_attention with the FlashAttention-2 and cuDNN backends forced, and, where it
is importable (ANCHORS.md says how to install it), FlashAttention-4's.

Every system gets the same inputs (random normal; flashtune and FA4 read [b, s, h, d], SDPA its
[b, h, s, d] view of the same memory) and is timed the same way (bench/sdpa_compare.py's Timer:
CUDA events, L2 flushed before each repetition, warm-up, median). The systems are interleaved:
for each shape every system once, then again for each round, and a system's figure is the median
of its rounds. The grid follows ANCHORS.md: 16k tokens per batch, hidden 2048. Backward FLOPs
are 2.5 times the forward's, forward + backward 3.5 times (halved when causal). --group G gives
K and V h / G heads (grouped-query attention; SDPA is called with enable_gqa), FLOPs unchanged.

    python3 bench/bwd_compare.py --seqlens 512,1024,2048,4096,8192,16384 --head-dims 64,128,256 \
        --dtypes bf16 --rounds 2 --json out.json [--database tuned.db] [--deterministic]
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashtune  # noqa: E402
from ftlibs import second_copy  # noqa: E402
from sdpa_compare import Timer  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def fa4():
    try:
        from flash_attn.cute import flash_attn_func
        return flash_attn_func
    except Exception:  # noqa: BLE001 - not installed: left out
        return None


def twin_variant(how, knobs):
    """The variant that ft_attention_backward_kernel's description `how` names ("...: d=128,...")
    with knobs ("name=value,...") changed; a knob the variant does not have is an error."""
    params = dict(p.split("=", 1) for p in how.rsplit(": ", 1)[-1].split(","))
    for p in knobs.split(","):
        name, value = p.split("=", 1)
        if name not in params:
            raise ValueError("%s is no knob of %s" % (name, how))
        params[name] = value
    return ",".join("%s=%s" % kv for kv in params.items())


def twin_system(knobs, spec, deterministic):
    """The built-in default of each shape (as ft_attention_backward_kernel names it) with knobs
    ("name=value,...") changed, forced through spec, as a system's make."""
    defaults = flashtune.Context()
    contexts = {}

    def make(q, k, v, do, causal):
        how = defaults.backward_kernel(q, k, v, causal=causal, deterministic=deterministic)
        variant = twin_variant(how, knobs)
        if variant not in contexts:
            contexts[variant] = flashtune.Context(spec=spec, variant=variant)
        return flashtune_system(contexts[variant], deterministic)(q, k, v, do, causal)
    return make


def flashtune_system(ctx, deterministic):
    """flashtune through the context ctx (its tuned, forced or default kernels) as a system's make."""

    def make(q, k, v, do, causal):
        o, lse = ctx.forward(q, k, v, causal=causal, return_lse=True)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

        def bwd():
            ctx.backward(q, k, v, o, lse, do, causal=causal, dq=dq, dk=dk, dv=dv, deterministic=deterministic)

        def fwdbwd():
            o2, lse2 = ctx.forward(q, k, v, causal=causal, return_lse=True)
            ctx.backward(q, k, v, o2, lse2, do, causal=causal, dq=dq, dk=dk, dv=dv, deterministic=deterministic)
        return bwd, fwdbwd
    return make


def systems(ctx, fa4_func, deterministic):
    """Each system as (name, make): make(q, k, v, do, causal) -> (bwd(), fwdbwd()), closures on
    the inputs, q, k, v [b, s, h, d]."""

    def sdpa_sys(backend):
        def make(q, k, v, do, causal):
            qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
            dos = do.transpose(1, 2)
            gqa = {"enable_gqa": True} if ks.shape[1] != qs.shape[1] else {}
            with sdpa_kernel([backend]):
                o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, **gqa)

            def bwd():
                torch.autograd.grad(o, (qs, ks, vs), dos, retain_graph=True)

            def fwdbwd():
                with sdpa_kernel([backend]):
                    o2 = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, **gqa)
                torch.autograd.grad(o2, (qs, ks, vs), dos)
            return bwd, fwdbwd
        return make

    def fa4_sys(q, k, v, do, causal):
        qf, kf, vf = (t.detach().requires_grad_() for t in (q, k, v))
        o = fa4_func(qf, kf, vf, causal=causal)
        o = o[0] if isinstance(o, tuple) else o

        def bwd():
            torch.autograd.grad(o, (qf, kf, vf), do, retain_graph=True)

        def fwdbwd():
            o2 = fa4_func(qf, kf, vf, causal=causal)
            o2 = o2[0] if isinstance(o2, tuple) else o2
            torch.autograd.grad(o2, (qf, kf, vf), do)
        return bwd, fwdbwd

    out = [("flashtune", flashtune_system(ctx, deterministic)), ("FA2 (SDPA)", sdpa_sys(SDPBackend.FLASH_ATTENTION)),
           ("cuDNN (SDPA)", sdpa_sys(SDPBackend.CUDNN_ATTENTION))]
    if fa4_func is not None:
        out.append(("FA4", fa4_sys))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--head-dims", default="64,128,256")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--group", type=int, default=1,
                    help="query heads per K/V head: K and V get heads / group heads (shapes it does not divide "
                         "are left out)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--database", default="", help="tuning database (default: none, the built-in defaults)")
    ap.add_argument("--beside-defaults", action="store_true",
                    help="with --database: also time the built-in defaults, as system 'flashtune defaults'")
    ap.add_argument("--deterministic", action="store_true", help="flashtune's deterministic backward")
    ap.add_argument("--spec", default=None, help="flashtune: a backward spec whose --variant every call runs")
    ap.add_argument("--variant", default=None, help="flashtune: the (partial) variant of --spec to force")
    ap.add_argument("--systems", default=None, help="comma-separated names to time (default: all)")
    ap.add_argument("--alt", action="append", default=[],
                    help="D/CAUSAL[:NAME]=VARIANT: also time this (partial) variant of --alt-spec as system "
                         "'flashtune alt' (or 'flashtune NAME') on the shapes of head dim D and that causality "
                         "(repeatable; several NAMEs per group)")
    ap.add_argument("--twin", action="append", default=[],
                    help="NAME:KNOBS: also time each shape's built-in default with KNOBS (name=value,...) "
                         "changed, a variant of --alt-spec, as system 'flashtune NAME' (repeatable)")
    ap.add_argument("--alt-spec", default="specs/flash_bwd_sm90.lua", help="the spec of the --alt and --twin variants")
    ap.add_argument("--base-lib", default=None,
                    help="also time the built-in defaults of this other libflashtune (e.g. a build of the "
                         "commit before a change) as system 'flashtune base', interleaved with the rest")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.group < 1:
        ap.error("--group takes a positive count of query heads per K/V head")

    ctx = flashtune.Context(database=a.database, spec=a.spec, variant=a.variant)
    timer = Timer(warmup_ms=10, rep_ms=60, min_reps=5, max_reps=200)
    syss = systems(ctx, fa4(), a.deterministic)
    if a.systems:
        keep = a.systems.split(",")
        syss = [(n, m) for n, m in syss if any(n.startswith(k) for k in keep)]
    if a.beside_defaults:
        syss.append(("flashtune defaults", flashtune_system(flashtune.Context(), a.deterministic)))
    if a.base_lib:
        syss.append(("flashtune base", flashtune_system(second_copy(flashtune, a.base_lib).Context(), a.deterministic)))
    for twin in a.twin:
        label, knobs = twin.split(":", 1)
        syss.append(("flashtune " + label, twin_system(knobs, a.alt_spec, a.deterministic)))
    alts = {}
    for alt in a.alt:
        group, variant = alt.split("=", 1)
        group, _, label = group.partition(":")
        d, c = (int(x) for x in group.split("/"))
        alts.setdefault((d, c), []).append(("flashtune " + (label or "alt"), flashtune_system(
            flashtune.Context(spec=a.alt_spec, variant=variant), a.deterministic)))
    rows = []
    for dtype in a.dtypes.split(","):
        for d in (int(x) for x in a.head_dims.split(",")):
            for causal in (int(x) for x in a.causal.split(",")):
                for s in (int(x) for x in a.seqlens.split(",")):
                    b, h = max(1, 16384 // s), 2048 // d
                    if h % a.group:
                        print("  d=%d: %d heads, not a multiple of --group %d: left out" % (d, h, a.group),
                              file=sys.stderr)
                        continue
                    torch.manual_seed(s + d)
                    q, k, v, do = (torch.randn(b, s, n, d, device="cuda", dtype=DTYPES[dtype])
                                   for n in (h, h // a.group, h // a.group, h))
                    fwd_flops = flashtune.flops(b, h, s, s, d, causal)
                    times = {}
                    made = {}
                    shape_systems = syss + alts.get((d, causal), [])
                    for name, make in shape_systems:
                        try:
                            made[name] = make(q, k, v, do, bool(causal))
                            made[name][0]()  # compiles now: a variant the spec prunes fails here, not mid-round
                        except Exception as e:  # noqa: BLE001 - a system that cannot run this shape
                            made.pop(name, None)
                            print("  %s: %s" % (name, str(e).splitlines()[0][:120]), file=sys.stderr)
                    # The order rotates each round, so that no system always runs first (after the
                    # shape's set-up) or right after the same one: two systems of the same kernel
                    # had measured up to 3 % apart in a fixed order.
                    order = list(made)
                    for r in range(a.rounds):
                        turn = r % len(order) if order else 0
                        for name in order[turn:] + order[:turn]:
                            bwd, fwdbwd = made[name]
                            times.setdefault(name, ([], []))
                            times[name][0].append(timer(bwd))
                            times[name][1].append(timer(fwdbwd))
                    for name, (tb, tf) in times.items():
                        mb, mf = statistics.median(tb), statistics.median(tf)
                        rows.append({"system": name, "dtype": dtype, "d": d, "causal": causal, "seqlen": s,
                                     "batch": b, "heads": h, "heads_kv": h // a.group, "bwd_ms": mb,
                                     "fwdbwd_ms": mf,
                                     "bwd_tflops": 2.5 * fwd_flops / mb / 1e9, "fwdbwd_tflops": 3.5 * fwd_flops / mf / 1e9,
                                     "rounds": a.rounds, "spread_bwd": (max(tb) - min(tb)) / mb})
                        print("%-4s d=%-3d causal=%d s=%-5d %-13s bwd %7.3f ms %6.1f TFLOP/s   fwd+bwd %7.3f ms %6.1f" % (
                            dtype, d, causal, s, name, mb, rows[-1]["bwd_tflops"], mf, rows[-1]["fwdbwd_tflops"]),
                            flush=True)
                    del made
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "flashtune": flashtune.version(), "deterministic": a.deterministic, "rows": rows}, f, indent=1)
    # group geometric means
    print("\n%-4s %3s %6s  %-13s %9s %9s" % ("type", "d", "causal", "system", "bwd", "fwd+bwd"))
    groups = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["d"], r["causal"], r["system"]), []).append(r)
    for (dt, d, c, name), rs in groups.items():
        gb = math.exp(statistics.mean(math.log(r["bwd_tflops"]) for r in rs))
        gf = math.exp(statistics.mean(math.log(r["fwdbwd_tflops"]) for r in rs))
        print("%-4s %3d %6d  %-13s %9.1f %9.1f" % (dt, d, c, name, gb, gf))


if __name__ == "__main__":
    main()
