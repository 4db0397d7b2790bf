#!/usr/bin/env python3
"""The tuner's search against the exhaustive oracle, on the GPU machine: for each --only filter
(a sample of buckets), `flashtune tune SPEC --search S` (--search: halving or ranked) into one
database and the
exhaustive tune into another (the compile cache shared, so the second compiles nothing), then
each bucket's two winners re-measured interleaved in this process on the bucket's own shape
(flashtune.Context(spec=SPEC, variant=V), CUDA events around each call, a 256 MiB buffer
cleared before each repetition; first 2 s of the oracle's winner to bring the GPU to the
clock it settles at under sustained load, then --rounds rounds of --reps turns, each system one
repetition a turn in an order that rotates every turn, a round queued without waiting for the
GPU in between, so that the host's work per call is hidden as in the tuner's timing; the median
of all repetitions; with --neighbour all of it again on the bucket's neighbour, the second shape
the tuner races near-ties on). Beside them the oracle's winner
again, through a second context: the spread of this re-measurement itself (oracle / oracle
again), against which the search's difference can be judged; and the built-in default
(flashtune.Context(database=""), what an untuned install runs): the tuned winner must not be
slower than it beyond that spread. Also each tuner's recorded median against the independent
one, and the same relative to the built-in default where the tune raced it (its rows carry it):
the winner's recorded median over the default's, against the re-measured ratio, a figure the
board's state (the clock at the power limit wanders by several per cent over seconds) falls on
alike. With --second, a second exhaustive tune after the first (a database
of its own; --second-search ranked or halving: a second tune of that search instead): its winners
measured beside them, as two tunes on one machine would pick.

    python3 bench/tune_quality.py --flashtune .dev/run/flashtune --spec specs/flash_fwd_sm90.lua \\
        --only d=64,dtype=bf16 --only d=128,dtype=bf16 --only d=256,dtype=bf16 --out /tmp/quality

Writes OUT/quality.json and OUT/quality.md; prints the table. Needs PyTorch with CUDA. With
--check it exits 1 where a bucket misses a bar of the tuner's: the search's winner within 2 % of
the oracle's, not slower than the built-in default beyond the re-measurement's own spread (1 % at
least), and the search tune's recorded median within 3 % of the re-measured one.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# ms of GPU time the oracle's winner runs before a bucket's measurement: a GPU at its power limit
# times a few per cent faster in its first second of load than after (FT_SETTLE_MS in
# runtime/timing.h, bench/sustain.py), so the measurement is of the sustained clock, as a
# training loop runs (the tuner's races heat less: their absolute figures may read fast)
HEAT_MS = 2000.0

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def timed_call(flush, fn):
    """One repetition queued without waiting: flush (a buffer as large as the L2, or larger) cleared,
    then fn between two CUDA events, which it returns."""
    import torch
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    e0.record()
    fn()
    e1.record()
    return e0, e1


def interleaved(calls, flush, rounds, reps, heat_with):
    """The medians (ms) of calls (name -> a function that queues one call), measured as the top
    of this file says: heat_with's call back to back until HEAT_MS of GPU time, then `rounds`
    rounds of `reps` turns, each call one repetition a turn (after the flush), the order
    rotating every turn, a round queued without waiting for the GPU. The first call of each
    (the kernel's load) is made before."""
    import torch
    names = list(calls)
    times = {n: [] for n in names}

    def queue(n):
        return (n,) + timed_call(flush, calls[n])

    for n in names:
        calls[n]()
    heated = 0.0
    while heated < HEAT_MS:
        ev = [queue(heat_with) for _ in range(10)]
        torch.cuda.synchronize()
        heated += ev[0][1].elapsed_time(ev[-1][2])
    for r in range(rounds):
        m = len(names)
        ev = [queue(n) for i in range(reps) for n in names[(r + i) % m:] + names[:(r + i) % m]]
        torch.cuda.synchronize()
        for n, e0, e1 in ev:
            times[n].append(e0.elapsed_time(e1))
    return {n: statistics.median(times[n]) for n in names}


def flashtune_run(ft, spec, variant, shape, dtype, causal, heat=None, budget=None):
    """`flashtune run` of one variant on shape ("b=..,hq=..,..,d=.."), unverified: its median ms
    (NaN when it fails); heat and budget in ms, None for the command's defaults."""
    cmd = [ft, "run", "--spec", spec, "--variant", variant, "--shape", shape, "--dtype", dtype, "--json",
           "--no-verify"] + (["--causal"] if causal else [])
    cmd += (["--heat", str(heat)] if heat is not None else []) + (["--budget", str(budget)] if budget is not None else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    js = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return js[-1].get("median_ms", float("nan")) if p.returncode == 0 and js else float("nan")


def run_tune(ft, spec, db, only, search, extra):
    cmd = [ft, "tune", spec, "--db", db, "--only", only, "--search", search, "--json", "-q"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.exit("tune_quality: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return json.loads(lines[-1])


def query_ok(ft, db, *extra):
    """The ok rows of `flashtune query --db DB --json` (extra: e.g. "--all", every measurement)."""
    p = subprocess.run([ft, "query", "--db", db, "--json"] + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("tune_quality: flashtune query --db %s %s failed: %s" % (db, " ".join(extra), p.stderr[-1000:]))
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return [r for r in rows if r.get("status") == "ok"]


def winners(ft, db):
    """Each bucket's winner row: (op, key) -> row."""
    return {(r["op"], r["key"]): r for r in query_ok(ft, db) if r.get("winner")}


def recorded_all(ft, db):
    """Every ok measurement of a database: (op, key, variant) -> its recorded median (ms)."""
    return {(r["op"], r["key"], r["variant"]): r["median_ms"] for r in query_ok(ft, db, "--all") if r.get("median_ms")}


def variant_of(how):
    """The variant in flashtune.Context.kernel()'s answer ("built-in default: bm=64,...,d=64"), or
    None. The runtime names a built-in default as its table has it, completed for the call (the
    head dim, causality and dtype last), not in the spec's order of parameters."""
    tail = how.rsplit(": ", 1)[-1].strip()
    return tail if "=" in tail and " " not in tail else None


def same_variant(a, b):
    """Whether two variant texts name the same variant, whatever the order of their parameters."""
    return a is not None and b is not None and sorted(a.split(",")) == sorted(b.split(","))


def relative(recorded, op, key, winner, default, winner_ms, default_ms):
    """The winner's recorded median over the default's (the same tune's) against the re-measured
    ratio winner_ms / default_ms: 1.0 where they agree; None where the tune recorded no default."""
    w = recorded.get((op, key, winner))
    d = next((ms for (o, k, v), ms in recorded.items() if o == op and k == key and same_variant(v, default)), None)
    if w is None or d is None or not default_ms or not winner_ms:
        return None
    return (w / d) / (winner_ms / default_ms)


def selftest():
    """variant_of and relative on made-up answers; 0 when they hold."""
    rec = {("fwd", "k", "d=64,bm=128"): 1.10, ("fwd", "k", "d=64,bm=192"): 1.00}
    r = relative(rec, "fwd", "k", "d=64,bm=192", "d=64,bm=128", 0.95, 1.05)
    ok = (variant_of("built-in default: d=64,bm=128,bn=128") == "d=64,bm=128,bn=128"
          and variant_of("built-in default: bm=128,bn=128,d=64") == "bm=128,bn=128,d=64"
          and relative(rec, "fwd", "k", "d=64,bm=192", "bm=128,d=64", 0.95, 1.05) == r
          and not same_variant("d=64,bm=128", "d=64,bm=12")
          and variant_of("tuned for the nearest bucket (bf16 d=64): d=64,bm=192") == "d=64,bm=192"
          and variant_of("nothing tuned for bf16 d=64 causal=0") is None
          and r is not None and abs(r - (1.00 / 1.10) / (0.95 / 1.05)) < 1e-12
          and relative(rec, "fwd", "k", "d=64,bm=192", "d=64,bm=64", 0.95, 1.05) is None)
    print("tune_quality selftest: %s" % ("ok" if ok else "FAIL"))
    return 0 if ok else 1


def shape_of(text):
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split(","))}


def neighbour_of(sh):
    """The tuner's neighbour of a bucket's shape (ft__tuner_neighbour_shape): the keys 11/16 as many,
    a multiple of 8, and the queries likewise where they are as many as the keys."""
    nb = dict(sh)
    nb["sk"] = sh["sk"] * 11 // 16 // 8 * 8
    if sh["sq"] == sh["sk"]:
        nb["sq"] = nb["sk"]
    return nb


def main():
    if "--selftest" in sys.argv[1:]:
        sys.exit(selftest())
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", default="build/flashtune")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--only", action="append", required=True, help="a tune filter; each one tuned both ways")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="repetitions per system and round")
    ap.add_argument("--tune-arg", action="append", default=[], help="an extra argument for both tunes")
    ap.add_argument("--search", default="halving", choices=("halving", "ranked"), help="the search against the oracle")
    ap.add_argument("--second", action="store_true", help="a second exhaustive tune, its winners measured too")
    ap.add_argument("--second-search", default="exhaustive", choices=("exhaustive", "halving", "ranked"),
                    help="the second tune's search (default exhaustive)")
    ap.add_argument("--neighbour", action="store_true",
                    help="every system measured again on the bucket's neighbour (the tuner's: 11/16 of the sequence "
                         "lengths, a multiple of 8), so a winner is judged for the bucket, not only its own shape")
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true", help="exit 1 where a bucket misses a bar (see the top)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dbs = {s: os.path.join(a.out, s + ".db") for s in ("search", "exhaustive") + (("second",) if a.second else ())}
    tunes = {s: [] for s in dbs}
    for only in a.only:
        for s in dbs:
            t = run_tune(a.flashtune, a.spec, dbs[s], only,
                         {"search": a.search, "second": a.second_search}.get(s, "exhaustive"), a.tune_arg)
            tunes[s].append(t)
            print("tune %-10s --only %s: %.1f s wall, compiling %.1f s, verifying %.1f s, timing %.1f s, %d measured"
                  % (s, only, t["wall_ms"] / 1e3, t["compile_ms"] / 1e3, t["verify_ms"] / 1e3, t["time_ms"] / 1e3,
                     t["measured"]), flush=True)
    wh, we = winners(a.flashtune, dbs["search"]), winners(a.flashtune, dbs["exhaustive"])
    w2 = winners(a.flashtune, dbs["second"]) if a.second else {}
    rec_h, rec_e = recorded_all(a.flashtune, dbs["search"]), recorded_all(a.flashtune, dbs["exhaustive"])

    import torch
    import flashtune

    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    contexts = {}
    default_ctx = flashtune.Context(database="")  # no database: the built-in defaults

    def ctx(variant):
        if variant not in contexts:
            contexts[variant] = flashtune.Context(spec=a.spec, variant=variant)
        return contexts[variant]

    rows = []
    for key in sorted(set(wh) & set(we) & (set(w2) if a.second else set(we))):
        h, e = wh[key], we[key]
        sh = shape_of(e["shape"])
        dt = torch.bfloat16 if e["dtype"] == "bf16" else torch.float16
        causal = bool(e["causal"])
        systems = ("search", "exhaustive", "again", "default") + (("second",) if a.second else ())
        variants = {"search": h["variant"], "exhaustive": e["variant"], "again": e["variant"]}
        ctxs = {s: ctx(variants[s]) for s in ("search", "exhaustive")}
        ctxs["again"] = flashtune.Context(spec=a.spec, variant=e["variant"])  # a context of its own
        ctxs["default"] = default_ctx
        if a.second:
            variants["second"] = w2[key]["variant"]
            ctxs["second"] = ctx(variants["second"])

        default_variant = [None]  # the built-in default's variant on the bucket's shape

        def measure(sh):
            """The systems' medians on shape sh, interleaved (see the top of the file)."""
            q = torch.randn(sh["b"], sh["sq"], sh["hq"], e["d"], device="cuda", dtype=dt)
            k = torch.randn(sh["b"], sh["sk"], sh["hkv"], e["d"], device="cuda", dtype=dt)
            v = torch.randn_like(k)
            if default_variant[0] is None:
                default_variant[0] = variant_of(default_ctx.kernel(q, k, v, causal=causal))
            calls = {s: (lambda c: lambda: c.forward(q, k, v, causal=causal))(ctxs[s]) for s in systems}
            # heated with the oracle's winner, so that every system is timed at the clock the GPU
            # settles at under this load
            return interleaved(calls, flush, a.rounds, a.reps, "exhaustive")

        t0 = time.time()
        med = measure(sh)
        window = [t0, time.time()]  # wall-clock seconds, for bench/clock_match.py
        mh, me, ma, md = (med[s] for s in systems[:4])
        rows.append({"key": key[1], "shape": e["shape"], "search": h["variant"], "exhaustive": e["variant"],
                     "search_ms": mh, "exhaustive_ms": me, "again_ms": ma, "oracle_over_search": me / mh,
                     "oracle_over_again": me / ma, "default_ms": md, "default_over_oracle": md / me,
                     "search_recorded_ms": h["median_ms"], "exhaustive_recorded_ms": e["median_ms"],
                     "recorded_over_measured": [h["median_ms"] / mh, e["median_ms"] / me], "window": window,
                     "default": default_variant[0],
                     "relative_recorded_over_measured": [
                         relative(rec_h, key[0], key[1], h["variant"], default_variant[0], mh, md),
                         relative(rec_e, key[0], key[1], e["variant"], default_variant[0], me, md)]})
        if a.neighbour:
            nb = neighbour_of(sh)
            mn = measure(nb)
            rows[-1].update({"neighbour": ",".join("%s=%d" % kv for kv in nb.items()),
                             "nb_oracle_over_search": mn["exhaustive"] / mn["search"],
                             "nb_oracle_over_again": mn["exhaustive"] / mn["again"],
                             "nb_default_over_oracle": mn["default"] / mn["exhaustive"]})
        if a.second:
            m2 = med["second"]
            rows[-1].update({"second": variants["second"], "second_ms": m2, "oracle_over_second": me / m2,
                             "search_over_second": mh / m2, "second_recorded_ms": w2[key]["median_ms"]})
            rows[-1]["recorded_over_measured"].append(w2[key]["median_ms"] / m2)
        print("%-70s %s  search %.4f ms, oracle %.4f ms (again %.4f): %.3f (noise %.3f), default / oracle %.3f%s; "
              "recorded/measured %s (relative to the default %s)%s"
              % (key[1], e["shape"], mh, me, ma, me / mh, me / ma, md / me,
                 ", oracle / second tune's %.3f, search / second tune's %.3f"
                 % (rows[-1]["oracle_over_second"], rows[-1]["search_over_second"]) if a.second else "",
                 " ".join("%.3f" % x for x in rows[-1]["recorded_over_measured"]),
                 " ".join("-" if x is None else "%.3f" % x for x in rows[-1]["relative_recorded_over_measured"]),
                 "; neighbour %s: oracle / search %.3f (noise %.3f), default / oracle %.3f"
                 % (rows[-1]["neighbour"], rows[-1]["nb_oracle_over_search"], rows[-1]["nb_oracle_over_again"],
                    rows[-1]["nb_default_over_oracle"]) if a.neighbour else ""), flush=True)
    sums = {s: {k: sum(t[k] for t in tunes[s]) for k in ("wall_ms", "compile_ms", "verify_ms", "time_ms", "measured")}
            for s in tunes}
    with open(os.path.join(a.out, "quality.json"), "w") as f:
        json.dump({"spec": a.spec, "search": a.search, "second_search": a.second_search if a.second else None, "only": a.only, "rounds": a.rounds, "reps": a.reps, "tunes": tunes, "sums": sums,
                   "rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "quality.md"), "w") as f:
        f.write("| bucket | shape | search's winner | oracle's winner | oracle ms / search ms | oracle ms / oracle ms "
                "again | default ms / oracle ms | oracle ms / second tune's ms | recorded / measured (search, oracle, "
                "second) | the same relative to the default (search, oracle) |%s\n|---|---|---|---|---|---|---|---|---|---|%s\n"
                % (" neighbour | there: oracle / search | there: oracle / again | there: default / oracle |"
                   if a.neighbour else "", "---|---|---|---|" if a.neighbour else ""))
        for r in rows:
            f.write("| %s | %s | %s | %s | %.3f | %.3f | %.3f | %s | %s | %s |%s\n" % (
                r["key"], r["shape"], r["search"], r["exhaustive"], r["oracle_over_search"], r["oracle_over_again"],
                r["default_over_oracle"],
                "%.3f" % r["oracle_over_second"] if "second" in r else "",
                " ".join("%.3f" % x for x in r["recorded_over_measured"]),
                " ".join("-" if x is None else "%.3f" % x for x in r["relative_recorded_over_measured"]),
                " %s | %.3f | %.3f | %.3f |" % (r["neighbour"], r["nb_oracle_over_search"], r["nb_oracle_over_again"],
                                                 r["nb_default_over_oracle"]) if a.neighbour else ""))
        f.write("\nTuning time (s): " + ", ".join("%s: wall %.1f, timing %.1f, %d measured" % (
            a.search if s == "search" else s, v["wall_ms"] / 1e3, v["time_ms"] / 1e3, v["measured"]) for s, v in sums.items()) + "\n")
    worst = min((r["oracle_over_search"] for r in rows), default=float("nan"))
    noise = max((abs(1 - r["oracle_over_again"]) for r in rows), default=float("nan"))
    rec = [x for r in rows for x in r["recorded_over_measured"]]
    rel = [x for r in rows for x in r["relative_recorded_over_measured"] if x is not None]
    print("buckets %d; worst oracle/search %.3f (1.0: the search's winner as fast as the oracle's), the "
          "re-measurement's own spread up to %.3f; timing %.1f s %s against %.1f s exhaustive; tuners' "
          "recorded / measured %.3f-%.3f, relative to the default %.3f-%.3f (%d of %d raced it); default / oracle at "
          "least %.3f (under 1: the default faster)%s"
          % (len(rows), worst, noise, sums["search"]["time_ms"] / 1e3, a.search, sums["exhaustive"]["time_ms"] / 1e3,
             min(rec, default=float("nan")), max(rec, default=float("nan")),
             min(rel, default=float("nan")), max(rel, default=float("nan")), len(rel), 2 * len(rows),
             min((r["default_over_oracle"] for r in rows), default=float("nan")),
             "; oracle / second tune's %.3f-%.3f, search / second tune's %.3f-%.3f (the second: %s)"
             % (min(r["oracle_over_second"] for r in rows), max(r["oracle_over_second"] for r in rows),
                min(r["search_over_second"] for r in rows), max(r["search_over_second"] for r in rows),
                a.second_search)
             if a.second and rows else ""))

    if a.check:
        sys.exit(check(rows))


def check(rows):
    """The bars of --check, each miss printed; 1 when there is one, else 0."""
    spread = max([0.01] + [abs(1 - r[k]) for r in rows for k in ("oracle_over_again", "nb_oracle_over_again") if k in r])
    misses = []
    for r in rows:
        what = "%s %s" % (r["key"], r["shape"])
        if r["oracle_over_search"] < 0.98:
            misses.append("%s: the search's winner at %.3f of the oracle's speed (2 %% allowed)" % (what, r["oracle_over_search"]))
        if r["default_over_oracle"] * r["oracle_over_search"] < 1 - spread:
            misses.append("%s: the built-in default %.3f times as fast as the search's winner (spread %.3f)"
                          % (what, 1 / (r["default_over_oracle"] * r["oracle_over_search"]), spread))
        if abs(r["recorded_over_measured"][0] - 1) > 0.03:
            misses.append("%s: the search tune recorded %.3f of the re-measured median (3 %% allowed)"
                          % (what, r["recorded_over_measured"][0]))
    for m in misses:
        print("MISS " + m)
    print("check: %d buckets, %d misses (the re-measurement's spread %.3f)" % (len(rows), len(misses), spread))
    return 1 if misses or not rows else 0


if __name__ == "__main__":
    main()
