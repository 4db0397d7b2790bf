#!/usr/bin/env python3
"""Whether the tuner's recorded figures and tune_quality's re-measurement differ by how long the
GPU ran before the timing: for each bucket of a quality run (its quality.json: shape, winners,
recorded and re-measured medians), `flashtune run` of the search's winner alone, once after
--short ms of heat and once after --long (each a fresh process, after the idle of its start),
and the four figures side by side as ratios to the re-measurement.

    python3 bench/heat_check.py --flashtune .dev/run/flashtune --quality /tmp/ft-quality/quality.json
"""
import argparse
import json
import statistics

from tune_quality import flashtune_run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", required=True)
    ap.add_argument("--quality", required=True)
    ap.add_argument("--short", type=int, default=150)
    ap.add_argument("--long", type=int, default=1500)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--json")
    a = ap.parse_args()
    q = json.load(open(a.quality))
    out = []
    print("%-30s %-34s %9s %9s %9s %9s | %6s %6s %6s" % ("bucket", "shape", "recorded", "measured", "run short",
                                                         "run long", "rec/m", "sh/m", "lo/m"))
    for r in q["rows"]:
        key = json.loads(r["key"])
        sh = dict(kv.split("=") for kv in r["shape"].split(","))
        shape = "b=%s,hq=%s,hkv=%s,sq=%s,sk=%s,d=%d" % (sh["b"], sh["hq"], sh["hkv"], sh["sq"], sh["sk"], key["d"])
        args = (a.flashtune, q["spec"], r["search"], shape, key["dtype"], key["causal"])
        short = flashtune_run(*args, heat=a.short, budget=a.budget)
        long_ = flashtune_run(*args, heat=a.long, budget=a.budget)
        m, rec = r["search_ms"], r["search_recorded_ms"]
        row = {"key": key, "shape": shape, "variant": r["search"], "recorded_ms": rec, "measured_ms": m,
               "run_short_ms": short, "run_long_ms": long_, "short_heat_ms": a.short, "long_heat_ms": a.long}
        out.append(row)
        print("d=%-3d causal=%d sq=%-6d        %-34s %9.4f %9.4f %9.4f %9.4f | %6.3f %6.3f %6.3f" % (
            key["d"], key["causal"], key["sq"], r["shape"], rec, m, short, long_, rec / m, short / m, long_ / m),
            flush=True)
    for k, name in (("recorded_ms", "recorded"), ("run_short_ms", "run short"), ("run_long_ms", "run long")):
        devs = [abs(x[k] / x["measured_ms"] - 1) for x in out if x[k] == x[k]]
        if devs:
            print("%-10s / measured: median |1 - ratio| %.3f, worst %.3f, %d of %d beyond 3 %%" % (
                name, statistics.median(devs), max(devs), sum(d > 0.03 for d in devs), len(devs)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
