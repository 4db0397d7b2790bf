#!/usr/bin/env python3
"""The causal forward's schedules side by side, on the GPU machine: twins of a few sm_90a variants
that differ in `balance` only (0: a CTA per row block, the hardware's order; 1: persistent CTAs,
units of a long and a short block; 2: persistent CTAs taking blocks longest first from a counter),
timed interleaved on the papers' grid (bench/tune_quality.py's interleaved: heat, then rounds of
turns, the order rotating, the L2 flushed before each call), their outputs compared with each
other's (the same rows computed in another order: equal up to rounding, and never NaN).

    python3 bench/sched_ab.py --spec specs/flash_fwd_sm90.lua --seqlens 1024,4096,16384 --json out.json
"""
import argparse
import json
import os
import sys

from tune_quality import interleaved

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

# The built-in causal defaults at d = 64, 128, 256 (runtime/defaults.c) and d = 64's tuned long-shape
# tile, without the balance field.
BASES = [
    "d=64,bm=128,bn=128,stages=3,causal=1,pingpong=0,overlap=1,psmem=0,pexp=0,skip_rescale=0",
    "d=64,bm=192,bn=128,stages=3,causal=1,pingpong=0,overlap=0,psmem=0,pexp=0,skip_rescale=0",
    "d=128,bm=128,bn=128,stages=2,causal=1,pingpong=0,overlap=1,psmem=0,pexp=0,skip_rescale=0",
    "d=256,bm=128,bn=80,stages=2,causal=1,pingpong=1,overlap=1,psmem=0,pexp=0,skip_rescale=1",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="specs/flash_fwd_sm90.lua")
    ap.add_argument("--seqlens", default="1024,4096,16384")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--bases", default=";".join(BASES), help="variants without balance, ';'-separated")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()

    import torch
    import flashtune

    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    rows, bad = [], 0
    for base in a.bases.split(";"):
        d = int(base.split(",")[0].split("=")[1])
        ctxs = {b: flashtune.Context(spec=a.spec, variant="%s,dtype=%s,balance=%d" % (base, a.dtype, b))
                for b in (0, 1, 2)}
        for s in (int(x) for x in a.seqlens.split(",")):
            b, h = 16384 // s, 2048 // d
            q = torch.randn(b, s, h, d, device="cuda", dtype=dt)
            k = torch.randn(b, s, h, d, device="cuda", dtype=dt)
            v = torch.randn_like(k)
            outs = {n: c.forward(q, k, v, causal=True) for n, c in ctxs.items()}
            outs = {n: (o[0] if isinstance(o, tuple) else o).float() for n, o in outs.items()}
            diff = max((outs[n] - outs[1]).abs().max().item() for n in (0, 2))
            finite = all(torch.isfinite(o).all().item() for o in outs.values())
            ok = finite and diff <= 1e-2
            bad += not ok
            calls = {n: (lambda c: lambda: c.forward(q, k, v, causal=True))(c) for n, c in ctxs.items()}
            med = interleaved(calls, flush, a.rounds, a.reps, 1)
            flops = 4.0 * b * h * s * s * d / 2
            row = {"base": base, "d": d, "seqlen": s, "batch": b, "heads": h,
                   "ms": {str(n): med[n] for n in med}, "tflops": {str(n): flops / med[n] / 1e9 for n in med},
                   "max_diff_vs_1": diff, "finite": finite}
            rows.append(row)
            print("d=%3d s=%5d %-60s balance 0/1/2: %7.1f %7.1f %7.1f TFLOP/s; 2/1 %.3f, 2/0 %.3f; diff %.2g%s"
                  % (d, s, base[base.index(",") + 1:], row["tflops"]["0"], row["tflops"]["1"], row["tflops"]["2"],
                     med[1] / med[2], med[0] / med[2], diff, "" if ok else "  MISMATCH"), flush=True)
    with open(a.json, "w") as f:
        json.dump({"rows": rows, "rounds": a.rounds, "reps": a.reps, "dtype": a.dtype}, f, indent=1)
    print("sched_ab: %d rows, %d mismatches" % (len(rows), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
