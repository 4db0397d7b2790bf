#!/usr/bin/env python3
"""Where a variant's time comes from, on the GPU machine: for the variants of one --only filter of
a spec, on one bucket's shape, three figures side by side: the tuner's recorded median (an
exhaustive tune of the filter; its leaders' figures come from the worker's race), `flashtune run`
of each alone (heated, then timed), and this process's interleaved measurement (each variant one
repetition a turn, the order rotating, after 300 ms of heat: bench/tune_quality.py's interleaved).

    python3 bench/race_check.py --flashtune .dev/run/flashtune --spec specs/flash_fwd_sm90.lua \\
        --only d=256,dtype=bf16,causal=0,bm=128,bn=64,stages=2 --shape b=2,hq=8,sq=8192 --out /tmp/rc
"""
import argparse
import json
import os
import subprocess
import sys

from tune_quality import flashtune_run, interleaved

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", default="build/flashtune")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--only", required=True)
    ap.add_argument("--shape", required=True, help="b=..,hq=..,sq=.. (hkv, sk default to hq, sq)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    db = os.path.join(a.out, "race_check.db")
    sh = {k: int(v) for k, v in (kv.split("=") for kv in a.shape.split(","))}
    sh.setdefault("hkv", sh["hq"])
    sh.setdefault("sk", sh["sq"])
    p = subprocess.run([a.flashtune, "tune", a.spec, "--db", db, "--only", a.only, "--search", "exhaustive", "-q"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("race_check: tune failed: " + p.stderr[-2000:])
    p = subprocess.run([a.flashtune, "query", "--db", db, "--all", "--json"], capture_output=True, text=True)
    want = "b=%d,hq=%d,hkv=%d,sq=%d,sk=%d" % (sh["b"], sh["hq"], sh["hkv"], sh["sq"], sh["sk"])
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    rows = [r for r in rows if r.get("shape") == want and r.get("status") == "ok"]
    if not rows:
        sys.exit("race_check: no ok result of shape %s in the tune" % want)
    d, causal, dtype = rows[0]["d"], bool(rows[0]["causal"]), rows[0]["dtype"]
    res = {r["variant"]: {"recorded": r["median_ms"]} for r in rows}
    shape_arg = "b=%d,hq=%d,hkv=%d,sq=%d,sk=%d,d=%d" % (sh["b"], sh["hq"], sh["hkv"], sh["sq"], sh["sk"], d)
    for v in res:
        ms = flashtune_run(a.flashtune, a.spec, v, shape_arg, dtype, causal)
        res[v]["run"] = ms if ms == ms else None
    import torch
    import flashtune
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    q = torch.randn(sh["b"], sh["sq"], sh["hq"], d, device="cuda", dtype=dt)
    k = torch.randn(sh["b"], sh["sk"], sh["hkv"], d, device="cuda", dtype=dt)
    v_ = torch.randn_like(k)
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    names = sorted(res)
    ctx = {n: flashtune.Context(spec=a.spec, variant=n) for n in names}
    calls = {n: (lambda c: lambda: c.forward(q, k, v_, causal=causal))(ctx[n]) for n in names}
    for n, ms in interleaved(calls, flush, a.rounds, a.reps, names[0]).items():
        res[n]["interleaved"] = ms
    with open(os.path.join(a.out, "race_check.json"), "w") as f:
        json.dump({"spec": a.spec, "only": a.only, "shape": shape_arg, "results": res}, f, indent=1)
    print("shape %s %s causal=%d" % (shape_arg, dtype, causal))
    print("%-100s %10s %10s %12s" % ("variant", "recorded", "run", "interleaved"))
    for n in names:
        r = res[n]
        print("%-100s %10.4f %10s %12.4f" % (n, r["recorded"], "%.4f" % r["run"] if r["run"] else "-",
                                             r["interleaved"]))


if __name__ == "__main__":
    main()
