#!/usr/bin/env python3
"""Where one kernel's time differs between the ways it is timed, on the GPU machine: for each
--case (a forward variant of --spec and a shape), the variant timed

    run        `flashtune run` (the worker's launch, C: a 256 MiB memset before each repetition,
               CUDA events around the call, after --heat ms of heat)
    alone      this process, through the library (flashtune.Context(spec, variant).forward),
               one system: tune_quality's interleaved() with nothing to interleave
    rotation   the same beside a second context of the same variant and --others copies more,
               as tune_quality rotates its systems
    prealloc   the library's call writing into one output allocated once (out=), alone
    memset     alone, the buffer cleared by the driver's cuMemsetD8Async (as the worker and `run`
               clear it) instead of PyTorch's zero_()

each --repeat times in turn, and the medians printed as ratios to `run`'s. A gap between run and
alone is the call path's or the flush's (memset tells which); between alone and rotation, the
rotation's.

    python3 bench/call_path.py --flashtune .dev/run/flashtune --spec specs/flash_fwd_sm90.lua \\
        --case 'b=16,hq=32,sq=1024,causal=0:d=64,bm=192,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1'
"""
import argparse
import json
import os
import statistics
import sys

from tune_quality import flashtune_run, interleaved

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


class DriverFlush:
    """A stand-in for the flush tensor whose zero_() is the driver's cuMemsetD8Async on PyTorch's
    current stream, as runtime/timing.c clears its buffer."""

    def __init__(self, t):
        import ctypes
        import torch
        self.t, self.torch = t, torch
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.cuda.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]

    def zero_(self):
        s = self.torch.cuda.current_stream().cuda_stream
        r = self.cuda.cuMemsetD8Async(self.t.data_ptr(), 0, self.t.numel(), s)
        if r != 0:
            raise RuntimeError("cuMemsetD8Async: CUresult %d" % r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--case", action="append", required=True, help="SHAPE:VARIANT (b,hq,sq,causal : variant)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--others", type=int, default=3)
    ap.add_argument("--heat", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    import flashtune
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    driver_flush = DriverFlush(flush)
    out = []
    for case in a.case:
        shape_text, variant = case.split(":", 1)
        sh = {k: int(v) for k, v in (kv.split("=") for kv in shape_text.split(","))}
        sh.setdefault("hkv", sh["hq"])
        sh.setdefault("sk", sh["sq"])
        vd = dict(kv.split("=") for kv in variant.split(","))
        d, causal, dtype = int(vd["d"]), bool(sh.get("causal", 0)), vd.get("dtype", "f16")
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        q = torch.randn(sh["b"], sh["sq"], sh["hq"], d, device="cuda", dtype=dt)
        k = torch.randn(sh["b"], sh["sk"], sh["hkv"], d, device="cuda", dtype=dt)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        ctxs = [flashtune.Context(spec=a.spec, variant=variant) for _ in range(a.others + 2)]
        shape = "b=%d,hq=%d,hkv=%d,sq=%d,sk=%d" % (sh["b"], sh["hq"], sh["hkv"], sh["sq"], sh["sk"])
        figs = {"run": [], "alone": [], "rotation": [], "prealloc": [], "memset": []}
        for _ in range(a.repeat):
            figs["run"].append(flashtune_run(a.flashtune, a.spec, variant, "%s,d=%d" % (shape, d), dtype, causal,
                                             heat=a.heat))
            c0 = ctxs[0]
            figs["alone"].append(interleaved({"x": lambda: c0.forward(q, k, v, causal=causal)}, flush, a.rounds,
                                             a.reps, "x")["x"])
            calls = {"s%d" % i: (lambda c: lambda: c.forward(q, k, v, causal=causal))(c) for i, c in enumerate(ctxs)}
            figs["rotation"].append(interleaved(calls, flush, a.rounds, a.reps, "s0")["s0"])
            figs["prealloc"].append(interleaved({"x": lambda: c0.forward(q, k, v, causal=causal, out=o)}, flush,
                                                a.rounds, a.reps, "x")["x"])
            figs["memset"].append(interleaved({"x": lambda: c0.forward(q, k, v, causal=causal)}, driver_flush,
                                              a.rounds, a.reps, "x")["x"])
        med = {m: statistics.median(x) for m, x in figs.items()}
        out.append({"shape": shape, "variant": variant, "figures": figs, "medians": med})
        print("%s causal=%d %s: run %.4f ms; alone %.3f, rotation %.3f, prealloc %.3f, memset %.3f of run's "
              "(%d repeats: %s)" % (
            shape, causal, variant, med["run"], med["alone"] / med["run"], med["rotation"] / med["run"],
            med["prealloc"] / med["run"], med["memset"] / med["run"], a.repeat,
            "; ".join("%s %s" % (m, ",".join("%.4f" % y for y in x)) for m, x in figs.items())), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
