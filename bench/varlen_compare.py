#!/usr/bin/env python3
"""A variable-length prefill batch side by side on one GPU: flashtune's varlen_attention on the
packed sequences against one dense flashtune call on a batch of the same number of sequences, all
of the mean length, and, where importable, FlashAttention-4's flash_attn_varlen_func on the same
packed batch and its flash_attn_func on the dense one (ANCHORS.md says how to install it), with
cuDNN (scaled_dot_product_attention, CUDNN_ATTENTION backend forced, K/V heads repeated for
grouped-query shapes) on the dense batch. The defaults are the serving issue's varlen bar: 64
sequences with lengths drawn uniformly from 128..4096, causal, head dim 128, 32 query heads over
8 K/V heads, bf16; the bar asks of flashtune-varlen at least 0.95 of flashtune-dense's TFLOP/s and
at least fa4-varlen's.

The lengths come from Python's random.Random(seed) (the same on every machine); each sequence
attends to itself only (s_q = s_k), causal aligned bottom-right, which for s_q = s_k is SDPA's
top-left is_causal too. q is packed [total, heads_q, d], k and v [total, heads_kv, d], with
int32 cu_seqlens on the GPU; the dense batch is [seqs, mean, heads, d] with the mean length
rounded to a multiple of 8. FLOPs follow ANCHORS.md per sequence, 4·s²·heads_q·d halved when
causal (s²/2 pairs, not s(s+1)/2), summed over the sequences: the packed batch does more work
than the dense one (the mean of s² exceeds the square of the mean), so the two compare by
TFLOP/s, not by time.

Before anything is timed each system's output is checked against an fp32 reference (SDPA's math
backend, one sequence at a time): the first three sequences and the longest of the packed batch,
the first and the last sequence of the dense one, NaN looked for in the whole output. A
flashtune output with a NaN or an error above the tolerance (2e-2 bf16, 1e-2 f16) ends the run
with exit status 1; another system's is reported and that system left out. Timing is
bench/sdpa_compare.py's Timer (CUDA events, L2 flushed before each repetition, median). The
systems are interleaved, each once per round, the order rotated from round to round, and a
system's figure is the median of its rounds.

    python3 bench/varlen_compare.py --rounds 5 --json out.json [--spec S --variant V] [--database DB]
        [--seqs 64 --min 128 --max 4096 --seed 0] [--heads 32 --kv-heads 8 --d 128 --dtype bf16 --causal 1]
        [--systems flashtune,fa4]   names to time, by prefix (default: all)
        [--dry-run]                 the lengths and FLOP counts only (no GPU)

Exit status 77 (and a line "skipped: ...") where PyTorch or a CUDA GPU is missing.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = {"bf16": 2e-2, "f16": 1e-2}
SKIP = 77


def fwd_flops(seqlen, heads, d, causal):
    """Forward FLOPs of one sequence attending to itself, ANCHORS.md's convention."""
    f = 4.0 * seqlen * seqlen * heads * d
    return f / 2 if causal else f


def draw_lengths(a):
    rng = random.Random(a.seed)
    return [rng.randint(a.min, a.max) for _ in range(a.seqs)]


def summary(lengths):
    return {"count": len(lengths), "total": sum(lengths), "min": min(lengths), "max": max(lengths),
            "mean": statistics.mean(lengths), "median": statistics.median(lengths),
            "stdev": statistics.pstdev(lengths), "lengths": lengths}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", type=int, default=64, help="sequences in the batch")
    ap.add_argument("--min", type=int, default=128, help="shortest length drawn")
    ap.add_argument("--max", type=int, default=4096, help="longest length drawn")
    ap.add_argument("--seed", type=int, default=0, help="seed of the lengths")
    ap.add_argument("--heads", type=int, default=32, help="query heads")
    ap.add_argument("--kv-heads", type=int, default=8, help="K/V heads (a divisor of --heads)")
    ap.add_argument("--d", type=int, default=128, help="head dim")
    ap.add_argument("--dtype", choices=sorted(TOLERANCE), default="bf16")
    ap.add_argument("--causal", type=int, choices=(0, 1), default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--database", default="", help="tuning database (default: none, the built-in defaults)")
    ap.add_argument("--spec", default=None, help="flashtune: a spec whose --variant every call of its operation runs")
    ap.add_argument("--variant", default=None, help="flashtune: the (partial) variant of --spec to force")
    ap.add_argument("--systems", default=None, help="comma-separated name prefixes to time (default: all)")
    ap.add_argument("--dry-run", action="store_true", help="print the lengths and FLOP counts, touch no GPU")
    ap.add_argument("--json", default=None, help="write every number here")
    a = ap.parse_args()
    if a.seqs < 1 or a.min < 1 or a.max < a.min:
        ap.error("need --seqs >= 1 and 1 <= --min <= --max")
    if a.heads < 1 or a.kv_heads < 1 or a.heads % a.kv_heads != 0:
        ap.error("--heads must be a positive multiple of --kv-heads")
    if a.d < 8 or a.d % 8 != 0:
        ap.error("--d must be a positive multiple of 8")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    return a


def first(r):
    """The output of a call that may return (out, lse), as FlashAttention-4's functions do."""
    return r[0] if isinstance(r, (tuple, list)) else r


def reference(torch, q, k, v, causal):
    """fp32 attention of one sequence, q [s, hq, d] and k, v [s, hkv, d], through SDPA's math
    backend; [s, hq, d]."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = q.shape[1] // k.shape[1]
    qt = q.float().transpose(0, 1)
    kt = k.float().repeat_interleave(g, dim=1).transpose(0, 1)
    vt = v.float().repeat_interleave(g, dim=1).transpose(0, 1)
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal)).transpose(0, 1)


def main():
    a = parse_args()
    lengths = draw_lengths(a)
    mean_len = max(8, int(round(statistics.mean(lengths) / 8.0)) * 8)
    flops_varlen = sum(fwd_flops(s, a.heads, a.d, a.causal) for s in lengths)
    flops_dense = a.seqs * fwd_flops(mean_len, a.heads, a.d, a.causal)
    config = {"seqs": a.seqs, "min": a.min, "max": a.max, "seed": a.seed, "heads_q": a.heads,
              "heads_kv": a.kv_heads, "d": a.d, "dtype": a.dtype, "causal": a.causal, "rounds": a.rounds,
              "dense_seqlen": mean_len, "database": a.database, "spec": a.spec, "variant": a.variant}
    lens = summary(lengths)
    print("# %d sequences, lengths %d..%d (mean %.1f, median %.1f, total %d; seed %d), dense %d x %d; "
          "hq=%d hkv=%d d=%d %s causal=%d" % (a.seqs, lens["min"], lens["max"], lens["mean"], lens["median"],
                                              lens["total"], a.seed, a.seqs, mean_len, a.heads, a.kv_heads, a.d,
                                              a.dtype, a.causal), flush=True)
    print("# forward FLOPs: varlen %.4g, dense %.4g (4*s^2*hq*d per sequence%s)" % (
        flops_varlen, flops_dense, ", halved: causal" if a.causal else ""), flush=True)
    if a.dry_run:
        print("lengths: %s" % " ".join(str(s) for s in lengths))
        return 0

    try:
        import torch
    except ImportError as e:
        print("skipped: no PyTorch (%s)" % e, flush=True)
        return SKIP
    if not torch.cuda.is_available():
        print("skipped: PyTorch sees no CUDA GPU", flush=True)
        return SKIP
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    sys.path.insert(0, HERE)
    import flashtune  # noqa: E402
    from sdpa_compare import Timer  # noqa: E402

    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    causal = bool(a.causal)
    dev = torch.cuda.get_device_properties(0)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "gpu": dev.name,
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "method": "CUDA events, L2 flushed before each repetition, median; systems interleaved in rounds, "
                      "median of the rounds",
            "flops": "forward, 4*s^2*heads_q*d per sequence, halved when causal, summed"}
    print("# %s, torch %s (CUDA %s, cuDNN %s), %s" % (
        dev.name, torch.__version__, torch.version.cuda, meta["cudnn"], meta["date"]), flush=True)

    torch.manual_seed(a.seed)
    total = sum(lengths)
    q = torch.randn(total, a.heads, a.d, device="cuda", dtype=dtype)
    k = torch.randn(total, a.kv_heads, a.d, device="cuda", dtype=dtype)
    v = torch.randn(total, a.kv_heads, a.d, device="cuda", dtype=dtype)
    offsets = [0]
    for s in lengths:
        offsets.append(offsets[-1] + s)
    cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    max_len = max(lengths)
    qd = torch.randn(a.seqs, mean_len, a.heads, a.d, device="cuda", dtype=dtype)
    kd = torch.randn(a.seqs, mean_len, a.kv_heads, a.d, device="cuda", dtype=dtype)
    vd = torch.randn(a.seqs, mean_len, a.kv_heads, a.d, device="cuda", dtype=dtype)

    skipped = {}
    try:
        ctx = flashtune.Context(database=a.database, spec=a.spec, variant=a.variant)
        meta["flashtune"] = flashtune.version()
    except Exception as e:  # noqa: BLE001 - no library, no GPU it can use: its systems are left out
        ctx = None
        skipped["flashtune-varlen"] = skipped["flashtune-dense"] = "no flashtune context: %s" % e
    try:
        from flash_attn.cute import flash_attn_func, flash_attn_varlen_func
        from importlib.metadata import PackageNotFoundError, version as dist_version
        try:
            meta["fa4"] = dist_version("flash-attn-4")
        except PackageNotFoundError:  # unzipped without its dist-info
            meta["fa4"] = "?"
    except Exception as e:  # noqa: BLE001 - not installed: left out
        flash_attn_func = flash_attn_varlen_func = None
        skipped["fa4-varlen"] = skipped["fa4-dense"] = "FlashAttention-4 not importable: %s" % (
            str(e).splitlines()[0][:160] if str(e) else type(e).__name__)

    # Each system: name -> (kind, closure that runs the forward and returns O).
    g = a.heads // a.kv_heads
    makers = {}
    if ctx is not None:
        makers["flashtune-varlen"] = ("varlen", lambda: flashtune.varlen_attention(
            q, k, v, cu, cu, max_len, max_len, causal=causal, context=ctx))
        makers["flashtune-dense"] = ("dense", lambda: flashtune.attention(qd, kd, vd, causal=causal, context=ctx))
    if flash_attn_varlen_func is not None:
        # qv is flash_attn_varlen_func's fourth parameter: everything after v by keyword. Both FA4
        # functions return (out, lse), lse None unless asked for or a gradient needs it.
        makers["fa4-varlen"] = ("varlen", lambda: first(flash_attn_varlen_func(
            q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max_len, max_seqlen_k=max_len, causal=causal)))
        makers["fa4-dense"] = ("dense", lambda: first(flash_attn_func(qd, kd, vd, causal=causal)))
    qdt = qd.transpose(1, 2)
    kdt = (kd.repeat_interleave(g, dim=2) if g > 1 else kd).transpose(1, 2)
    vdt = (vd.repeat_interleave(g, dim=2) if g > 1 else vd).transpose(1, 2)

    def cudnn_dense():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qdt, kdt, vdt, is_causal=causal).transpose(1, 2)
    makers["cudnn-dense"] = ("dense", cudnn_dense)
    if a.systems:
        keep = a.systems.split(",")
        makers = {n: m for n, m in makers.items() if any(n.startswith(x) for x in keep)}
        skipped = {n: why for n, why in skipped.items() if any(n.startswith(x) for x in keep)}

    # The check: each system once (its first call also builds or JIT-compiles its kernel) against
    # the fp32 reference on a few sequences.
    varlen_check = sorted(set(list(range(min(3, a.seqs))) + [lengths.index(max_len)]))
    dense_check = sorted({0, a.seqs - 1})
    tol = TOLERANCE[a.dtype]
    with torch.no_grad():
        refs_varlen = [reference(torch, q[offsets[i]:offsets[i + 1]], k[offsets[i]:offsets[i + 1]],
                                 v[offsets[i]:offsets[i + 1]], causal) for i in varlen_check]
        refs_dense = [reference(torch, qd[i], kd[i], vd[i], causal) for i in dense_check]
    checks, runs, failed = {}, {}, False
    for name, (kind, run) in makers.items():
        try:
            with torch.no_grad():
                o = run()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a system that cannot run this batch
            skipped[name] = "cannot run: %s" % (str(e).splitlines()[0][:160] if str(e) else type(e).__name__)
            continue
        if kind == "varlen":
            parts = [o[offsets[i]:offsets[i + 1]] for i in varlen_check]
            refs = refs_varlen
        else:
            parts = [o[i] for i in dense_check]
            refs = refs_dense
        nan = bool(torch.isnan(o).any())  # anywhere in the output, not only the sequences compared
        err = max((p.float() - r).abs().max().item() for p, r in zip(parts, refs))
        ok = not nan and err <= tol
        checks[name] = {"max_abs_err": err, "nan": nan, "ok": ok,
                        "sequences": varlen_check if kind == "varlen" else dense_check}
        print("  check %-16s max |err| %.2e%s vs fp32 on sequences %s: %s" % (
            name, err, " NaN" if nan else "", ",".join(str(i) for i in checks[name]["sequences"]),
            "ok" if ok else "FAILED (tolerance %.0e)" % tol), flush=True)
        del o, parts
        if ok:
            runs[name] = run
        elif name.startswith("flashtune"):
            failed = True
        else:
            skipped[name] = "wrong output (max |err| %.2e%s)" % (err, ", NaN" if nan else "")
    del refs_varlen, refs_dense
    for name, why in skipped.items():
        print("  %s: skipped: %s" % (name, why), flush=True)
    if failed:
        print("flashtune's output is wrong: not timed", flush=True)
        return 1
    how = ""
    if ctx is not None and "flashtune-dense" in runs:
        how = ctx.kernel(qd, kd, vd, causal=causal)
        print("    flashtune-dense ran: %s" % how, flush=True)

    timer = Timer()
    names = list(runs)
    times = {n: [] for n in names}
    with torch.no_grad():
        for r in range(a.rounds):
            turn = r % len(names) if names else 0
            for n in names[turn:] + names[:turn]:
                times[n].append(timer(runs[n]))
    rows = {}
    for n in names:
        ms = statistics.median(times[n])
        flops = flops_varlen if makers[n][0] == "varlen" else flops_dense
        rows[n] = {"kind": makers[n][0], "ms": ms, "tflops": flops / ms / 1e9, "flops": flops,
                   "rounds_ms": times[n], "spread": (max(times[n]) - min(times[n])) / ms}
    for n, row in rows.items():
        for ref in ("flashtune-dense", "fa4-varlen"):
            row["vs_" + ref] = row["tflops"] / rows[ref]["tflops"] if ref in rows else None

    def ratio(x):
        return "%7.3f" % x if x is not None else "%7s" % "-"
    print("\n| system | ms | TFLOP/s | x flashtune-dense | x fa4-varlen | spread |")
    print("|---|---|---|---|---|---|")
    for n, row in rows.items():
        print("| %-16s | %8.3f | %6.1f | %s | %s | %4.1f %% |" % (
            n, row["ms"], row["tflops"], ratio(row["vs_flashtune-dense"]), ratio(row["vs_fa4-varlen"]),
            100 * row["spread"]), flush=True)
    bar = None
    if "flashtune-varlen" in rows:
        fv = rows["flashtune-varlen"]
        bar = {"vs_dense": fv["vs_flashtune-dense"], "vs_fa4_varlen": fv["vs_fa4-varlen"],
               "dense_met": fv["vs_flashtune-dense"] >= 0.95 if fv["vs_flashtune-dense"] is not None else None,
               "fa4_met": fv["vs_fa4-varlen"] >= 1.0 if fv["vs_fa4-varlen"] is not None else None}

        def verdict(x, want):
            return "n/a" if x is None else "%.3f (%s %.2f)" % (x, "meets" if x >= want else "below", want)
        print("\nbar: flashtune-varlen / flashtune-dense %s; / fa4-varlen %s" % (
            verdict(bar["vs_dense"], 0.95), verdict(bar["vs_fa4_varlen"], 1.0)), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "config": config, "lengths": lens,
                       "flops": {"varlen": flops_varlen, "dense": flops_dense}, "check": checks,
                       "skipped": skipped, "systems": rows, "flashtune_dense_kernel": how, "bar": bar}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
