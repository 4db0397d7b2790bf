#!/usr/bin/env python3
"""What a forward call costs on the host through each Python path, and what the first call of a
new shape costs in a fresh process.

Per call: on each shape ([batch, seqlen, heads, head_dim] tensors) three systems run the same
forward on the same tensors:
    op       flashtune.attention(q, k, v): the torch.library operator flashtune::attention_fwd
    context  Context.forward(q, k, v): the ctypes call itself
    sdpa     torch.nn.functional.scaled_dot_product_attention on the [b, h, s, d] views
The figure is wall-clock time per call over N back-to-back calls (time.perf_counter around the
loop, torch.cuda.synchronize before and after it), the median of R rounds that interleave the
systems. Beside it, the GPU time of one call: CUDA events around it, queued behind a spin kernel
(torch.cuda._sleep) so that the host's launch does not show. Where the wall time per call is more
than 1.2 times the GPU time the launch path bounds the loop ("host"), else the kernels do ("GPU",
and then the host's cost is at most the wall time). The op and the context run the same kernel (checked,
and named in the output); every output is compared with SDPA's.

First call: a fresh Python process (this script again) imports torch, makes the tensors of one
shape, then times importing flashtune, making the module's context (flashtune._context, what the
op's first call makes) and the first and second flashtune.attention calls, each to the end of the
GPU's work. "cold": in a new, empty FLASHTUNE_CACHE_DIR (NVRTC compiles the kernel); "warm": in
the directory a cold run filled (the cubin is read and loaded). SDPA's first call in a fresh
process beside it. The median of K processes each.

Without --database no tuning database is read (FLASHTUNE_DB names a file that does not exist):
the built-in default kernels, so that only the compile cache differs between cold and warm.

    python3 bench/op_overhead.py --json out.json [--calls N] [--rounds R] [--first-runs K]
        [--shapes prefill,decode] [--dtype bf16] [--database DB]

Exits 77 ("skipped") without PyTorch or a GPU.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# name: (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal)
SHAPES = {
    "prefill": (1, 128, 128, 8, 8, 64, False),
    "decode": (1, 1, 4096, 8, 8, 64, False),
}
SYSTEMS = ("op", "context", "sdpa")
DTYPES = ("bf16", "f16")
SPIN_CYCLES = 2_000_000  # about a millisecond of GPU time: longer than any call's launch


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="prefill,decode", help="names among %s" % ", ".join(SHAPES))
    ap.add_argument("--dtype", default="bf16", choices=DTYPES)
    ap.add_argument("--calls", type=int, default=2000, help="back-to-back calls per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--gpu-reps", type=int, default=30, help="single calls timed with CUDA events")
    ap.add_argument("--first-runs", type=int, default=3, help="fresh processes per first-call figure (0: none)")
    ap.add_argument("--database", default="", help="tuning database (default: none, the built-in defaults)")
    ap.add_argument("--json", default=None, help="write every number here")
    # internal: one first-call measurement in this process (SYSTEM,SHAPE), printed as JSON
    ap.add_argument("--first-call", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.shape_names = [s for s in a.shapes.split(",") if s]
    for s in a.shape_names:
        if s not in SHAPES:
            ap.error("unknown shape '%s' (%s)" % (s, ", ".join(SHAPES)))
    if not a.shape_names:
        ap.error("--shapes names no shape")
    for name in ("calls", "rounds", "gpu_reps"):
        if getattr(a, name) < 1:
            ap.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.first_runs < 0:
        ap.error("--first-runs must not be negative")
    if a.first_call is not None:
        parts = a.first_call.split(",")
        if len(parts) != 2 or parts[0] not in ("op", "sdpa") or parts[1] not in SHAPES:
            ap.error("--first-call takes op|sdpa,SHAPE")
    return a


def tensors(torch, shape, dtype):
    b, sq, sk, hq, hkv, d, _ = shape
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    g = torch.Generator("cuda").manual_seed(sq + sk + d)
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=dt, generator=g)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt, generator=g)
    v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt, generator=g)
    return q, k, v


def calls(torch, flashtune, ctx, q, k, v, causal):
    """Each system's call on these tensors, as a closure returning O ([b, s, h, d])."""
    import torch.nn.functional as F

    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    gqa = {"enable_gqa": True} if q.shape[2] != k.shape[2] else {}  # PyTorch 2.5 and later
    return {
        "op": lambda: flashtune.attention(q, k, v, causal=causal),
        "context": lambda: ctx.forward(q, k, v, causal=causal),
        "sdpa": lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **gqa).transpose(1, 2),
    }


def wall_us(torch, fn, n):
    """Wall-clock microseconds per call over n back-to-back calls, the GPU idle at both ends."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def gpu_us(torch, fn, reps):
    """The GPU time of one call in microseconds, the median of reps: CUDA events around the call,
    each behind a spin kernel so that the events and the call's kernels are queued before the GPU
    reaches them (the host's launch time does not show)."""
    spin = getattr(torch.cuda, "_sleep", None)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda.synchronize()
    for start, end in events:
        if spin is not None:
            spin(SPIN_CYCLES)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events) * 1e3, spin is not None


def first_call(a):
    """The child of a first-call measurement: prints one JSON line."""
    import torch

    system, name = a.first_call.split(",")
    shape = SHAPES[name]
    torch.empty(1, device="cuda")  # the CUDA context, which every system needs, before any timing
    q, k, v = tensors(torch, shape, a.dtype)
    torch.cuda.synchronize()
    out = {"system": system, "shape": name}
    if system == "op":
        t = time.perf_counter()
        sys.path.insert(0, os.path.join(HERE, "..", "python"))
        import flashtune
        out["import_ms"] = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        flashtune._context(torch.cuda.current_device())
        out["context_ms"] = (time.perf_counter() - t) * 1e3
        fn = calls(torch, flashtune, None, q, k, v, shape[6])["op"]
    else:
        fn = calls(torch, None, None, q, k, v, shape[6])["sdpa"]
    for key in ("first_ms", "second_ms"):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out[key] = (time.perf_counter() - t) * 1e3
    print(json.dumps(out))
    return 0


def run_child(a, system, name, env):
    cmd = [sys.executable, os.path.abspath(__file__), "--first-call", "%s,%s" % (system, name), "--dtype", a.dtype]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        # a skip says why on stdout, a failure on stderr (a traceback's last line)
        said = (p.stdout if p.returncode == 77 else p.stderr).strip().splitlines()
        return {"error": (said[-1] if said else "exit status %d" % p.returncode)[:300]}
    return json.loads(lines[-1])


def first_calls(a, scratch, env):
    """For each shape: the op's first call cold and warm, and SDPA's, K fresh processes each."""
    rows = []
    for name in a.shape_names:
        warm_dir = None
        for system, cache in (("op", "cold"), ("op", "warm"), ("sdpa", None)):
            runs = []
            for i in range(a.first_runs):
                e = dict(env)
                if cache == "cold":
                    e["FLASHTUNE_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-", dir=scratch)
                    warm_dir = warm_dir or e["FLASHTUNE_CACHE_DIR"]
                elif cache == "warm":
                    e["FLASHTUNE_CACHE_DIR"] = warm_dir
                runs.append(run_child(a, system, name, e))
            ok = [r for r in runs if "error" not in r]
            row = {"shape": name, "system": system, "cache": cache, "runs": runs}
            for key in ("import_ms", "context_ms", "first_ms", "second_ms"):
                if ok and key in ok[0]:
                    row[key] = statistics.median(r[key] for r in ok)
            if len(ok) < len(runs):
                row["error"] = next(r["error"] for r in runs if "error" in r)
            rows.append(row)
    return rows


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError:
        print("skipped: no PyTorch")
        return 77
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return 77
    if a.first_call is not None:
        return first_call(a)

    scratch = tempfile.mkdtemp(prefix="ft-op-overhead-")
    try:
        # the op's module context and ours read the same database: --database, else none
        os.environ["FLASHTUNE_DB"] = a.database or os.path.join(scratch, "no-database.db")
        sys.path.insert(0, os.path.join(HERE, "..", "python"))
        import flashtune

        dev = torch.cuda.current_device()
        ctx = flashtune.Context()
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "flashtune": flashtune.version(),
            "dtype": a.dtype,
            "database": a.database or None,
            "calls": a.calls, "rounds": a.rounds, "gpu_reps": a.gpu_reps, "first_runs": a.first_runs,
            "method": "wall clock per call over back-to-back calls (synchronized at both ends), median of "
                      "interleaved rounds; GPU time: CUDA events around one call behind a spin kernel",
        }
        print("# %s, torch %s (CUDA %s), flashtune %s, %s, %s" % (
            meta["gpu"], meta["torch"], meta["cuda"], meta["flashtune"], a.dtype, meta["date"]), flush=True)
        per_call, failures = [], 0
        for name in a.shape_names:
            shape = SHAPES[name]
            causal = shape[6]
            q, k, v = tensors(torch, shape, a.dtype)
            fns = calls(torch, flashtune, ctx, q, k, v, causal)
            outs = {s: fn() for s, fn in fns.items()}  # the first calls build the kernels
            torch.cuda.synchronize()
            ran = ctx.kernel(q, k, v, causal=causal)
            same = flashtune._context(dev).kernel(q, k, v, causal=causal) == ran
            errs = {s: (o.float() - outs["sdpa"].float()).abs().max().item() for s, o in outs.items() if s != "sdpa"}
            ok = same and all(e < 0.05 for e in errs.values())
            failures += not ok
            print("%s b=%d sq=%d sk=%d hq=%d hkv=%d d=%d causal=%d: flashtune ran %s (the op the same: %s); "
                  "max |O - SDPA's|: %s" % ((name,) + shape[:6] + (causal, ran, "yes" if same else "NO",
                                            ", ".join("%s %.1e" % p for p in errs.items()))), flush=True)
            walls = {s: [] for s in fns}
            for s, fn in fns.items():
                wall_us(torch, fn, max(1, a.calls // 10))  # warm: the allocator's blocks, the caches
            for _ in range(a.rounds):
                for s, fn in fns.items():
                    walls[s].append(wall_us(torch, fn, a.calls))
            for s, fn in fns.items():
                g, spun = gpu_us(torch, fn, a.gpu_reps)
                w = statistics.median(walls[s])
                per_call.append({"shape": name, "batch": shape[0], "seqlen_q": shape[1], "seqlen_k": shape[2],
                                 "heads_q": shape[3], "heads_kv": shape[4], "head_dim": shape[5], "causal": causal,
                                 "system": s, "wall_us": w, "wall_us_rounds": walls[s], "gpu_us": g,
                                 "gpu_behind_spin": spun, "bound": "host" if w > 1.2 * g else "GPU",
                                 "kernel": ran if s != "sdpa" else None,
                                 "max_abs_err_vs_sdpa": errs.get(s)})
            del q, k, v, fns, outs
        print("\n| shape | system | wall µs/call | GPU µs/call | bound |")
        print("|---|---|---|---|---|")
        for r in per_call:
            print("| %s | %s | %.2f | %.2f | %s |" % (r["shape"], r["system"], r["wall_us"], r["gpu_us"], r["bound"]))

        first = []
        if a.first_runs:
            env = dict(os.environ)
            first = first_calls(a, scratch, env)
            print("\nfirst call in a fresh process (ms, the median over %d processes)" % a.first_runs)
            print("| shape | system | cache | import flashtune | context | first call | second call |")
            print("|---|---|---|---|---|---|---|")
            for r in first:
                if "first_ms" not in r:
                    print("| %s | %s | %s | failed: %s |" % (r["shape"], r["system"], r["cache"] or "-", r["error"]))
                    failures += 1
                    continue
                cells = ["%.2f" % r[key] if key in r else "-" for key in ("import_ms", "context_ms", "first_ms",
                                                                            "second_ms")]
                print("| %s | %s | %s | %s |" % (r["shape"], r["system"], r["cache"] or "-", " | ".join(cells)))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"meta": meta, "per_call": per_call, "first_call": first}, f, indent=1)
        ctx.close()
        if failures:
            print("op overhead: %d checks failed" % failures)
        return 1 if failures else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
