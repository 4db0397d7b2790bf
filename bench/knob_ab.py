#!/usr/bin/env python3
"""One knob's values side by side, on the GPU machine: twins of a few variants that differ in one
parameter only, timed interleaved on the papers' grid (16k tokens, hidden 2048; bench/
tune_quality.py's interleaved: heat, then rounds of turns, the order rotating, the L2 flushed
before each call), their outputs compared with the first value's (the same attention computed
another way: equal up to rounding, and never NaN). Each base is a variant without the knob; its
causal field says how the twins are called.

    python3 bench/knob_ab.py --knob balance --values 0,1,2 --json out.json      (the causal schedules)
    python3 bench/knob_ab.py --knob ostore --values 0,1 --bases 'd=128,bm=128,...' --json out.json
    python3 bench/knob_ab.py --knob pack --values 0,1 --group 8 --bases 'd=64,bm=192,...' --json out.json
    python3 bench/knob_ab.py --selftest

A line per base and sequence length: each value's TFLOP/s (causal FLOPs where causal), then
each value's time over the first value's time's inverse (> 1: faster than the first value).
--group G gives the calls G query heads per K/V head (the grid's heads, K and V with 1/G of them).
"""
import argparse
import json
import os
import sys

# The built-in causal defaults at d = 64, 128, 256 (runtime/defaults.c) and d = 64's tuned
# long-shape tile, without the balance field: the bases of --knob balance.
BALANCE_BASES = [
    "d=64,bm=128,bn=128,stages=3,causal=1,pingpong=0,overlap=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "d=64,bm=192,bn=128,stages=3,causal=1,pingpong=0,overlap=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "d=128,bm=128,bn=128,stages=2,causal=1,pingpong=0,overlap=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
    "d=256,bm=128,bn=80,stages=2,causal=1,pingpong=1,overlap=1,psmem=0,pexp=0,skip_rescale=1,ostore=0,early_rescale=0,ctas=1",
]


def fields(variant):
    """The variant's name=value pairs, in order."""
    return [kv.split("=", 1) for kv in variant.split(",") if kv]


def twin(base, knob, value, dtype):
    """The base variant with knob=value (and the dtype where the base has none)."""
    pairs = fields(base)
    names = [k for k, _ in pairs]
    if knob in names:
        raise ValueError("base %r already sets %s" % (base, knob))
    if "dtype" not in names:
        pairs.append(["dtype", dtype])
    pairs.append([knob, str(value)])
    return ",".join("%s=%s" % (k, v) for k, v in pairs)


def shape(base, seqlen):
    """(head dim, causal, batch, heads) of the grid's call at seqlen for base."""
    f = dict(fields(base))
    d = int(f["d"])
    return d, f.get("causal", "0") == "1", 16384 // seqlen, 2048 // d


def line(base, seqlen, values, tflops, ms):
    """The printed row: TFLOP/s per value, then the first value's time over each other's."""
    first = values[0]
    ratios = ["%s/%s %.3f" % (v, first, ms[first] / ms[v]) for v in values[1:]]
    return "d=%3s s=%5d %s: %s; %s" % (dict(fields(base))["d"], seqlen, base[base.index(",") + 1:],
                                       " ".join("%7.1f" % tflops[v] for v in values), ", ".join(ratios))


def selftest():
    base = "d=128,bm=128,bn=128,stages=2,causal=1,pingpong=0,overlap=1"
    t = twin(base, "ostore", 1, "bf16")
    assert t == base + ",dtype=bf16,ostore=1", t
    assert twin(base + ",dtype=f16", "ostore", 0, "bf16").endswith(",dtype=f16,ostore=0")
    try:
        twin(base + ",ostore=0", "ostore", 1, "bf16")
        raise AssertionError("a base that sets the knob was taken")
    except ValueError:
        pass
    assert shape(base, 4096) == (128, True, 4, 16)
    assert shape(base.replace("causal=1", "causal=0"), 512) == (128, False, 32, 16)
    text = line(base, 4096, ["0", "1"], {"0": 500.0, "1": 550.0}, {"0": 1.10, "1": 1.0})
    assert text.startswith("d=128 s= 4096 bm=128,") and text.endswith("  500.0   550.0; 1/0 1.100"), text
    for b in BALANCE_BASES:
        assert "balance" not in b and dict(fields(b))["causal"] == "1"
    print("knob_ab selftest: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="specs/flash_fwd_sm90.lua")
    ap.add_argument("--knob", default="balance")
    ap.add_argument("--values", default="0,1,2", help="the knob's values, the first the reference")
    ap.add_argument("--seqlens", default="1024,4096,16384")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--group", type=int, default=1, help="query heads per K/V head (dividing the grid's heads)")
    ap.add_argument("--bases", default=None,
                    help="variants without the knob, ';'-separated (default, for balance: the causal defaults)")
    ap.add_argument("--json")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        selftest()
        return
    if not a.json:
        ap.error("--json is required")
    if a.bases is None and a.knob != "balance":
        ap.error("--bases is required for a knob other than balance")
    if a.group < 1:
        ap.error("--group takes a positive count of query heads per K/V head")

    import torch

    from tune_quality import interleaved

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import flashtune

    values = a.values.split(",")
    bases = a.bases.split(";") if a.bases else BALANCE_BASES
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    rows, bad = [], 0
    for base in bases:
        ctxs = {v: flashtune.Context(spec=a.spec, variant=twin(base, a.knob, v, a.dtype)) for v in values}
        for s in (int(x) for x in a.seqlens.split(",")):
            d, causal, b, h = shape(base, s)
            if h % a.group:
                sys.exit("knob_ab: %d heads at d = %d are no multiple of --group %d" % (h, d, a.group))
            q = torch.randn(b, s, h, d, device="cuda", dtype=dt)
            k = torch.randn(b, s, h // a.group, d, device="cuda", dtype=dt)
            v_ = torch.randn_like(k)
            outs = {n: c.forward(q, k, v_, causal=causal) for n, c in ctxs.items()}
            outs = {n: (o[0] if isinstance(o, tuple) else o).float() for n, o in outs.items()}
            diff = max([(outs[n] - outs[values[0]]).abs().max().item() for n in values[1:]] or [0.0])
            finite = all(torch.isfinite(o).all().item() for o in outs.values())
            ok = finite and diff <= 1e-2
            bad += not ok
            calls = {n: (lambda c: lambda: c.forward(q, k, v_, causal=causal))(c) for n, c in ctxs.items()}
            med = interleaved(calls, flush, a.rounds, a.reps, values[0])  # heat with the first
            flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            tflops = {n: flops / med[n] / 1e9 for n in med}
            rows.append({"base": base, "knob": a.knob, "d": d, "causal": causal, "seqlen": s, "batch": b,
                         "heads": h, "group": a.group, "ms": med, "tflops": tflops, "max_diff_vs_first": diff, "finite": finite})
            print(line(base, s, values, tflops, med) + "; diff %.2g%s" % (diff, "" if ok else "  MISMATCH"),
                  flush=True)
    with open(a.json, "w") as f:
        json.dump({"rows": rows, "knob": a.knob, "values": values, "rounds": a.rounds, "reps": a.reps,
                   "dtype": a.dtype, "group": a.group}, f, indent=1)
    print("knob_ab %s: %d rows, %d mismatches" % (a.knob, len(rows), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
