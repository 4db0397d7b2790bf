#!/usr/bin/env python3
"""Side by side on one GPU: flashtune's forward kernels against PyTorch's
scaled_dot_product_attention with the FlashAttention-2 and cuDNN backends forced.

Every system gets the same input tensors (random normal, [batch, heads, seqlen, head_dim],
SDPA's native layout; flashtune reads them through strides) and is timed the same way: CUDA
events around each call, a 256 MiB buffer cleared before each repetition so that L2 holds
nothing, warm-up first, the median of the repetitions. The grid follows ANCHORS.md: 16k
tokens per batch (batch = 16384 / seqlen), hidden 2048 (heads = 2048 / head_dim).

For each (dtype, head dim, causal) the script times every variant of the spec that compiles
for the GPU (from `flashtune plan --json`), reports the best, and checks its output against
SDPA's. Usage:

    python3 bench/sdpa_compare.py --flashtune build/flashtune --seqlens 4096,16384 \
        --head-dims 64,128 --dtypes f16 --json out.json
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashtune  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


class Timer:
    """CUDA-event timing with an L2 flush before each repetition (the method of
    triton.testing.do_bench); returns the median in milliseconds."""

    def __init__(self, warmup_ms=25.0, rep_ms=100.0, min_reps=10, max_reps=500):
        self.flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms
        self.min_reps, self.max_reps = min_reps, max_reps

    def __call__(self, fn):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        est = max(start.elapsed_time(end) / 5, 1e-3)
        for _ in range(max(1, int(self.warmup_ms / est))):
            fn()
        n = min(self.max_reps, max(self.min_reps, int(self.rep_ms / est)))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self.flush.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def candidates(flashtune_bin, spec, arch, d, causal, dtype, limit):
    """Variants of the spec that compile for the GPU, from `flashtune plan --json`."""
    only = "d=%d,causal=%d,dtype=%s" % (d, causal, dtype)
    cmd = [flashtune_bin, "plan", spec, "--arch", arch, "--only", only, "--json", "-q"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = (json.loads(line) for line in out.splitlines() if line.strip())
    rows = [v for v in lines if v.get("kind") == "variant" and v["status"] == "compiled"]
    rows.sort(key=lambda v: (v["spill_stores"] + v["spill_loads"], v["variant"]))
    return [v["variant"] for v in rows[:limit]] if limit else [v["variant"] for v in rows]


def sdpa(backend, q, k, v, causal):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", default="build/flashtune")
    ap.add_argument("--spec", default="specs/flash_fwd.lua")
    ap.add_argument("--seqlens", default="4096,16384")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--limit", type=int, default=0, help="at most this many variants per group (0: all)")
    ap.add_argument("--json", help="write every number here")
    args = ap.parse_args()

    dev = torch.cuda.get_device_properties(0)
    arch = "sm_%d%d" % (dev.major, dev.minor)
    timer = Timer()
    results = []
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "gpu": dev.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "method": "CUDA events, L2 flushed before each repetition, median",
    }
    print("# %s, torch %s (CUDA %s, cuDNN %s), %s" % (dev.name, torch.__version__, torch.version.cuda,
                                                     torch.backends.cudnn.version(), meta["date"]), flush=True)
    for dtype in args.dtypes.split(","):
        for d in [int(x) for x in args.head_dims.split(",")]:
            for causal in [int(x) for x in args.causal.split(",")]:
                variants = candidates(args.flashtune, args.spec, arch, d, causal, dtype, args.limit)
                contexts = {}
                for v in variants:
                    try:
                        contexts[v] = flashtune.Context(variant=v)
                    except flashtune.FlashtuneError as e:
                        print("  %s: %s" % (v, e), flush=True)
                for s in [int(x) for x in args.seqlens.split(",")]:
                    b, h = max(1, args.tokens // s), args.hidden // d
                    torch.manual_seed(s + d)
                    q, k, v_ = (torch.randn(b, h, s, d, dtype=DTYPES[dtype], device="cuda") for _ in range(3))
                    o = torch.empty_like(q)
                    flops = flashtune.flops(b, h, s, s, d, causal)
                    row = {"dtype": dtype, "d": d, "causal": causal, "seqlen": s, "batch": b, "heads": h,
                           "flops": flops, "variants": {}}
                    ref = sdpa(SDPBackend.FLASH_ATTENTION, q, k, v_, causal)
                    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                        try:
                            ms = timer(lambda: sdpa(backend, q, k, v_, causal))
                            row[name] = {"ms": ms, "tflops": flops / ms / 1e9}
                        except RuntimeError as e:
                            row[name] = {"error": str(e).splitlines()[0]}
                    qt, kt, vt, ot = (t.transpose(1, 2) for t in (q, k, v_, o))
                    for var, ctx in contexts.items():
                        try:
                            ctx.forward(qt, kt, vt, causal=causal, out=ot)
                            torch.cuda.synchronize()
                            err = (o.float() - ref.float()).abs().max().item()
                            ms = timer(lambda: ctx.forward(qt, kt, vt, causal=causal, out=ot))
                            row["variants"][var] = {"ms": ms, "tflops": flops / ms / 1e9, "max_abs_err_vs_flash": err}
                        except (flashtune.FlashtuneError, RuntimeError) as e:
                            row["variants"][var] = {"error": str(e)}
                    ok = {k2: r for k2, r in row["variants"].items() if "ms" in r and r["max_abs_err_vs_flash"] < 0.05}
                    best = min(ok, key=lambda k2: ok[k2]["ms"]) if ok else None
                    row["best"] = best
                    results.append(row)
                    bt = ok[best]["tflops"] if best else float("nan")
                    ft = row["flash"].get("tflops", float("nan"))
                    ct = row["cudnn"].get("tflops", float("nan"))
                    print("%-4s d=%-3d causal=%d s=%-5d flashtune %6.1f  flash %6.1f  cudnn %6.1f  "
                          "vs flash %.2fx  vs cudnn %.2fx  best %s (err %.1e)" % (
                              dtype, d, causal, s, bt, ft, ct, bt / ft, bt / ct, best,
                              ok[best]["max_abs_err_vs_flash"] if best else float("nan")), flush=True)
                    del q, k, v_, o, ref
                for ctx in contexts.values():
                    ctx.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    # Summary: ratio of the best variant to each anchor, geometric mean per group.
    print("\n| dtype | d | causal | seqlens | flashtune / flash (gm) | flashtune / cudnn (gm) |")
    print("|---|---|---|---|---|---|")
    groups = {}
    for r in results:
        if r["best"] and "tflops" in r["flash"]:
            groups.setdefault((r["dtype"], r["d"], r["causal"]), []).append(r)
    for (dt, d, c), rows in sorted(groups.items()):
        gf = math.exp(sum(math.log(r["variants"][r["best"]]["tflops"] / r["flash"]["tflops"]) for r in rows) / len(rows))
        cs = [r for r in rows if "tflops" in r["cudnn"]]
        gc = math.exp(sum(math.log(r["variants"][r["best"]]["tflops"] / r["cudnn"]["tflops"]) for r in cs) / len(cs)) if cs else float("nan")
        print("| %s | %d | %d | %s | %.2f | %.2f |" % (dt, d, c, ",".join(str(r["seqlen"]) for r in rows), gf, gc))


if __name__ == "__main__":
    main()
