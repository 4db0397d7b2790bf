#!/usr/bin/env python3
"""Two builds of libflashtune side by side: the dense forward with each library's built-in
defaults, in alternating processes (FLASHTUNE_LIB; the first library first in even rounds, the
second first in odd ones), bf16, the grid of ANCHORS.md (16k tokens, hidden 2048), CUDA events,
the L2 cleared before each of 30 repetitions, the median per process and the median of the
rounds. Used to check that a change to a template leaves the dense path's speed as it was.

    python3 bench/ab_libs.py NEW/libflashtune.so OLD/libflashtune.so --rounds 4 --json ab.json

Each library is loaded with the Python package found beside it (DIR/python) or, failing that,
this checkout's python/: an older library reads only the argument versions of its own package.

--interleave: both libraries in this one process instead (bench/ftlibs.py), each shape's calls
interleaved: in every round each library once, the first in even rounds the second in odd ones,
timed by bench/sdpa_compare.py's Timer (CUDA events, the L2 flushed before each repetition, the
median); a library's figure is the median of its rounds. Alternating processes let each
process's own start (clocks, heat) weigh on its figures: the forward's macro A/Bs of 2026-12-06
moved up to 4 % a group from run to run, in ways that did not compose (bench/NOTES.md,
sixteenth stop). Interleaving puts both libraries under the same conditions, as
bench/bwd_compare.py --base-lib does for the backward. Both then go through this checkout's
package, so they must take its argument versions.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

SHAPES = [(d, c, s) for d in (64, 128, 256) for c in (0, 1) for s in (1024, 4096, 16384)]
HERE = os.path.dirname(os.path.abspath(__file__))


def child():
    import torch
    import flashtune

    ctx = flashtune.Context()
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    res = {}
    for d, c, s in SHAPES:
        b, h = 16384 // s, 2048 // d
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        ctx.forward(q, k, v, causal=bool(c))
        torch.cuda.synchronize()
        times = []
        for _ in range(30):
            flush.zero_()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            ctx.forward(q, k, v, causal=bool(c))
            e1.record()
            torch.cuda.synchronize()
            times.append(e0.elapsed_time(e1))
        flops = 4 * b * h * s * s * d * (0.5 if c else 1.0)
        res[f"d={d} causal={c} s={s}"] = flops / statistics.median(times) / 1e9
    print(json.dumps(res))


def interleaved(libs, rounds):
    """Both libraries in this process, SHAPES' calls interleaved per round (see --interleave):
    {"new": {shape: TFLOP/s}, "old": ...}, each the median of the rounds."""
    os.environ["FLASHTUNE_LIB"] = libs["new"]
    sys.path[:0] = [os.path.join(HERE, "..", "python"), HERE]
    import torch
    import flashtune
    from ftlibs import second_copy
    from sdpa_compare import Timer

    ctxs = {"new": flashtune.Context(), "old": second_copy(flashtune, libs["old"]).Context()}
    timer = Timer(warmup_ms=10, rep_ms=60, min_reps=5, max_reps=200)
    res = {"new": {}, "old": {}}
    for d, c, s in SHAPES:
        b, h = 16384 // s, 2048 // d
        torch.manual_seed(s + d)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        times = {"new": [], "old": []}
        for r in range(rounds):
            for name in ("new", "old") if r % 2 == 0 else ("old", "new"):
                times[name].append(timer(lambda ctx=ctxs[name]: ctx.forward(q, k, v, causal=bool(c))))
        flops = 4 * b * h * s * s * d * (0.5 if c else 1.0)
        for name, ms in times.items():
            res[name][f"d={d} causal={c} s={s}"] = flops / statistics.median(ms) / 1e9
    return res


def alternating(libs, rounds):
    """SHAPES in a process of each library in turn, `rounds` times (the first library first in
    even rounds): {"new": [{shape: TFLOP/s} a round], "old": ...}."""
    runs = {"new": [], "old": []}
    for r in range(rounds):
        for name in ("new", "old") if r % 2 == 0 else ("old", "new"):
            lib = libs[name]
            py = os.path.join(os.path.dirname(lib), "python")
            if not os.path.isdir(py):
                py = os.path.join(HERE, "..", "python")
            env = dict(os.environ, FLASHTUNE_LIB=lib, PYTHONPATH=py + os.pathsep + os.environ.get("PYTHONPATH", ""))
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                               capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{name} ({lib}) failed:\n{p.stderr[-3000:]}")
            runs[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--interleave", action="store_true", help="both libraries in one process, interleaved per round")
    ap.add_argument("--json")
    a = ap.parse_args()
    libs = {"new": os.path.abspath(a.new), "old": os.path.abspath(a.old)}
    if a.interleave:  # one figure a shape, already the median of the rounds
        runs = {name: [figures] for name, figures in interleaved(libs, a.rounds).items()}
    else:
        runs = alternating(libs, a.rounds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"libraries": libs, "interleaved": a.interleave, "rounds": runs}, f, indent=1)
    how = "interleaved in one process" if a.interleave else "alternating processes"
    print(f"{'shape':26s} {'new TFLOP/s':>12s} {'old TFLOP/s':>12s} {'new/old':>8s}  "
          f"(median of {a.rounds} rounds, {how})")
    groups = {}
    for key in runs["new"][0]:
        n = statistics.median(x[key] for x in runs["new"])
        o = statistics.median(x[key] for x in runs["old"])
        print(f"{key:26s} {n:12.1f} {o:12.1f} {n / o:8.3f}")
        groups.setdefault(key.rsplit(" s=", 1)[0], []).append(n / o)
    for group, ratios in groups.items():
        print(f"{group:26s} new/old geo-mean {math.exp(statistics.mean(math.log(x) for x in ratios)):.3f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child()
    else:
        main()
