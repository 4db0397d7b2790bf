#!/usr/bin/env python3
"""How far one kernel's measurement moves when nothing but the measuring changes, on the GPU
machine: for each --case (a forward variant of --spec and a shape), the same variant measured
as three "systems" (context A, context A again, and context B, a second context of the same
variant), under three schemes:

    sets     tune_quality's: --reps repetitions of one system queued, then the next system's,
             --rounds rounds rotating which system goes first
    long     the same with 5x the rounds
    alt      the systems taking turns on every repetition (A, A, B, A, A, B, ...)

Every repetition clears a 256 MiB buffer first and is timed by CUDA events around the call.
Prints per case and scheme the medians and the ratios A / A-again, A / B (1.0: no difference),
and the medians of each set in time order (a drift of the clock shows as a trend). With
--smi FILE, nvidia-smi samples the SM clock, power and temperature every 50 ms meanwhile.

    python3 bench/timing_probe.py --spec specs/flash_fwd_sm90.lua \\
        --case 'b=4,hq=21,sq=4096,causal=0:d=80,bm=192,bn=96,stages=3,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1'
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from tune_quality import timed_call  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--case", action="append", required=True, help="SHAPE:VARIANT (b,hq,sq,causal : variant)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--smi", help="a file for nvidia-smi's samples")
    ap.add_argument("--json")
    a = ap.parse_args()

    import torch
    import flashtune

    smi = None
    if a.smi:
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                                "--format=csv,noheader", "-lms", "50"], stdout=open(a.smi, "w"))
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    out = []
    t_start = time.time()
    for case in a.case:
        shape_text, variant = case.split(":", 1)
        sh = dict(kv.split("=") for kv in shape_text.split(","))
        b, hq, sq, causal = int(sh["b"]), int(sh["hq"]), int(sh["sq"]), sh.get("causal", "0") == "1"
        d = int(dict(kv.split("=") for kv in variant.split(","))["d"])
        dt = torch.bfloat16 if "dtype=bf16" in variant else torch.float16
        q = torch.randn(b, sq, hq, d, device="cuda", dtype=dt)
        k, v = torch.randn_like(q), torch.randn_like(q)
        ca = flashtune.Context(spec=a.spec, variant=variant)
        cb = flashtune.Context(spec=a.spec, variant=variant)
        systems = {"A": ca, "A again": ca, "B": cb}
        names = list(systems)
        for c in (ca, cb):
            for _ in range(3):
                c.forward(q, k, v, causal=causal)
        torch.cuda.synchronize()

        def timed(name):
            return timed_call(flush, lambda: systems[name].forward(q, k, v, causal=causal))

        results = {}
        for scheme, rounds in (("sets", a.rounds), ("long", 5 * a.rounds), ("alt", a.rounds)):
            times = {n: [] for n in names}
            sets = []
            if scheme == "alt":
                ev = [(n, timed(n)) for _ in range(a.reps) for n in names]
                torch.cuda.synchronize()
                for n, (e0, e1) in ev:
                    times[n].append(e0.elapsed_time(e1))
            else:
                for r in range(rounds):
                    for n in names[r % 3:] + names[:r % 3]:
                        ev = [timed(n) for _ in range(a.reps)]
                        torch.cuda.synchronize()
                        ts = [e0.elapsed_time(e1) for e0, e1 in ev]
                        times[n] += ts
                        sets.append((round(time.time() - t_start, 3), n, statistics.median(ts)))
            med = {n: statistics.median(times[n]) for n in names}
            results[scheme] = {"median_ms": med, "a_over_again": med["A"] / med["A again"],
                               "a_over_b": med["A"] / med["B"], "sets": sets}
            print("%-40s %-5s A %.4f ms  A/A-again %.3f  A/B %.3f  (%d reps each)"
                  % (shape_text, scheme, med["A"], med["A"] / med["A again"], med["A"] / med["B"],
                     len(times["A"])), flush=True)
            if sets:
                print("    sets in order: " + " ".join("%s:%.3f" % (n[0] + ("'" if n == "A again" else ""), m)
                                                   for _, n, m in sets), flush=True)
        out.append({"case": case, "results": results})
        for c in (ca, cb):
            c.close()
    if smi:
        smi.terminate()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cases": out, "rounds": a.rounds, "reps": a.reps}, f, indent=1)


if __name__ == "__main__":
    main()
