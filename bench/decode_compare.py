#!/usr/bin/env python3
"""Decode (a few queries per sequence against a long K/V cache) side by side on one GPU:
flashtune's forward against PyTorch's scaled_dot_product_attention with the cuDNN and
FlashAttention-2 backends forced (K/V heads repeated for grouped-query shapes, as SDPA's math
needs; the bytes counted are still the cache's) and, where importable, FlashAttention-4's
(ANCHORS.md says how to install it), with its own choice of the number of key splits.

Decode is bound by memory: the figure is the K and V bytes of the cache read per second (TB/s),
beside the time. Every shape's cache is larger than the L2 (134 MB and more against 60), so calls
are timed back to back: CUDA events around a burst of calls, the time per call the burst's over
its length, the median of several bursts (a call's host work, Python's included, overlaps the
previous call's kernels, as in a serving loop; --flush instead times each call alone after an L2
flush, bench/sdpa_compare.py's Timer, where host time shows). The systems are interleaved, each
shape once per system per round, and a system's figure is the median of its rounds.

    python3 bench/decode_compare.py --rounds 3 --json out.json [--spec S --variant V] [--database DB]
        [--paged 64,256]   flashtune on the same cache in pages too (flashtune-paged64, ...)
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashtune  # noqa: E402
from sdpa_compare import Timer  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}

# (batch, heads_q, heads_kv, seqlen_q, seqlen_k, causal): the serving issue's three decode shapes
# first, then a few more.
SHAPES = [
    (32, 32, 4, 1, 8192, 0),
    (4, 8, 1, 1, 131072, 0),
    (128, 16, 2, 2, 2048, 1),
    (8, 32, 8, 1, 32768, 0),
    (64, 32, 8, 4, 4096, 1),
    (1, 32, 32, 1, 65536, 0),
    (16, 32, 8, 16, 8192, 1),
]


class Burst:
    """Time per call of fn over bursts of back-to-back calls (CUDA events), median of bursts."""

    def __init__(self, calls=20, bursts=7):
        self.calls, self.bursts = calls, bursts

    def __call__(self, fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(self.bursts):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(self.calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / self.calls)
        return statistics.median(times)


def fa4():
    try:
        from flash_attn.cute import flash_attn_func
        return flash_attn_func
    except Exception:  # noqa: BLE001 - not installed: left out
        return None


def systems(ctx, fa4_func, paged=()):
    """Each system as (name, make): make(q, k, v, causal) -> a closure that runs the forward;
    paged: page sizes of flashtune's paged-cache systems."""

    def flashtune_sys(q, k, v, causal):
        out = torch.empty_like(q)
        ctx.forward(q, k, v, causal=causal, out=out)
        return lambda: ctx.forward(q, k, v, causal=causal, out=out)

    def sdpa_sys(backend):
        def make(q, k, v, causal):
            g = q.shape[2] // k.shape[2]
            qt = q.transpose(1, 2)
            kt = k.repeat_interleave(g, dim=2).transpose(1, 2) if g > 1 else k.transpose(1, 2)
            vt = v.repeat_interleave(g, dim=2).transpose(1, 2) if g > 1 else v.transpose(1, 2)
            # SDPA's is_causal is top-left aligned: with one query row it would see only key 0.
            # Bottom-right causality for sq < sk as a mask (the last sq rows of the square).
            mask = None
            if causal:
                sq, sk = q.shape[1], k.shape[1]
                i = torch.arange(sq, device=q.device)[:, None]
                j = torch.arange(sk, device=q.device)[None, :]
                mask = j <= i + (sk - sq)

            def run():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
            run()
            return run
        return make

    def fa4_sys(q, k, v, causal):
        # num_splits=0: FA4's own split heuristic (its default, 1, never splits the keys); where
        # that picks a split its sm90 path refuses ("SplitKV not supported on SM 9.0"): 1.
        try:
            fa4_func(q, k, v, causal=causal, num_splits=0)
            splits = 0
        except Exception:  # noqa: BLE001
            fa4_func(q, k, v, causal=causal, num_splits=1)
            splits = 1
        return lambda: fa4_func(q, k, v, causal=causal, num_splits=splits)

    def paged_sys(page):
        # The same cache in pages of `page` keys, shuffled in a pool (block_table), every sequence
        # using all of its keys: the same call as flashtune_sys's on a paged cache.
        def make(q, k, v, causal):
            b, sk, hkv, d = k.shape
            per_seq = sk // page
            table = torch.randperm(b * per_seq, device=q.device).view(b, per_seq).to(torch.int32)
            pool_k = torch.empty(b * per_seq, page, hkv, d, device=q.device, dtype=k.dtype)
            pool_v = torch.empty_like(pool_k)
            pool_k[table.long().flatten()] = k.reshape(b * per_seq, page, hkv, d)
            pool_v[table.long().flatten()] = v.reshape(b * per_seq, page, hkv, d)
            out = torch.empty_like(q)
            ctx.forward(q, pool_k, pool_v, causal=causal, out=out, block_table=table)
            return lambda: ctx.forward(q, pool_k, pool_v, causal=causal, out=out, block_table=table)
        return make

    out = [("flashtune", flashtune_sys)] + [("flashtune-paged%d" % p, paged_sys(p)) for p in paged] + [
        ("cuDNN", sdpa_sys(SDPBackend.CUDNN_ATTENTION)), ("FA2", sdpa_sys(SDPBackend.FLASH_ATTENTION))]
    if fa4_func is not None:
        out.append(("FA4", fa4_sys))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dims", default="128")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--database", default="", help="tuning database (default: none, the built-in defaults)")
    ap.add_argument("--spec", default=None, help="flashtune: a forward spec whose --variant every call runs")
    ap.add_argument("--variant", default=None, help="flashtune: the (partial) variant of --spec to force")
    ap.add_argument("--systems", default=None, help="comma-separated names to time (default: all)")
    ap.add_argument("--shapes", default=None, help="indices into SHAPES, comma-separated (default: all)")
    ap.add_argument("--flush", action="store_true", help="time each call alone after an L2 flush")
    ap.add_argument("--paged", default="", help="page sizes: flashtune on the same cache in shuffled pages too")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    ctx = flashtune.Context(database=a.database, spec=a.spec, variant=a.variant)
    timer = Timer(warmup_ms=10, rep_ms=50, min_reps=10, max_reps=300) if a.flush else Burst()
    syss = systems(ctx, fa4(), [int(p) for p in a.paged.split(",") if p])
    if a.systems:
        keep = a.systems.split(",")
        syss = [(n, m) for n, m in syss if any(n.startswith(k) for k in keep)]
    shapes = SHAPES if a.shapes is None else [SHAPES[int(i)] for i in a.shapes.split(",")]
    rows = []
    for dtype in a.dtypes.split(","):
        for d in (int(x) for x in a.head_dims.split(",")):
            for (b, hq, hkv, sq, sk, causal) in shapes:
                torch.manual_seed(b + sk + d)
                q = torch.randn(b, sq, hq, d, device="cuda", dtype=DTYPES[dtype])
                k, v = (torch.randn(b, sk, hkv, d, device="cuda", dtype=DTYPES[dtype]) for _ in range(2))
                kv_bytes = 2 * k.numel() * k.element_size()
                made, times = {}, {}
                for name, make in syss:
                    try:
                        made[name] = make(q, k, v, bool(causal))
                    except Exception as e:  # noqa: BLE001 - a system that cannot run this shape
                        print("  %s: %s" % (name, str(e).splitlines()[0][:120]), file=sys.stderr)
                how = ctx.kernel(q, k, v, causal=bool(causal)) if "flashtune" in made else ""
                order = list(made)  # rotating each round, as bwd_compare's
                for r in range(a.rounds):
                    turn = r % len(order) if order else 0
                    for name in order[turn:] + order[:turn]:
                        times.setdefault(name, []).append(timer(made[name]))
                for name, ts in times.items():
                    ms = statistics.median(ts)
                    rows.append({"system": name, "dtype": dtype, "d": d, "batch": b, "heads_q": hq, "heads_kv": hkv,
                                 "seqlen_q": sq, "seqlen_k": sk, "causal": causal, "ms": ms,
                                 "tbps": kv_bytes / (ms * 1e-3) / 1e12, "rounds": a.rounds,
                                 "spread": (max(ts) - min(ts)) / ms, "timing": "flush" if a.flush else "burst",
                                 "kernel": how if name == "flashtune" else ""})
                    print("%-4s d=%-3d b=%-3d hq=%-2d hkv=%-2d sq=%-2d sk=%-6d causal=%d %-9s %8.4f ms %5.2f TB/s" % (
                        dtype, d, b, hq, hkv, sq, sk, causal, name, ms, rows[-1]["tbps"]), flush=True)
                print("    flashtune ran: %s" % how, flush=True)
                del made
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "flashtune": flashtune.version(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
