#!/usr/bin/env python3
"""What each knob of a spec is worth, from a tune's measurements: for every bucket and every
value of each parameter, the fastest variant that has that value against the bucket's fastest
overall (1.000: the value costs nothing; 0.950: with the knob held there the bucket runs at 95 %
of its best). A knob switched off, measured, not guessed; the figures are the tuner's own medians
(one measurement per variant, at the clock the tune ran at), so differences under 2-3 % are
within their noise.

    flashtune query --db tuned.db --all --json > all.jsonl
    python3 bench/ablation.py all.jsonl [--params bn,overlap] [--markdown]

Reads `flashtune query --all --json` lines (other lines are skipped); only ok, non-stale rows.
Prints per parameter a table: rows the buckets (head dim, causal, seqlen, batch x heads), columns
the parameter's values; then each value's geometric mean over the buckets where it was measured.
"""
import argparse
import collections
import json
import math
import os
import sys


def load(path):
    rows = []
    with (sys.stdin if path == "-" else open(path)) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("status") != "ok" or r.get("stale") or not r.get("median_ms", 0) > 0:
                continue
            r["params"] = dict(kv.split("=", 1) for kv in r["variant"].split(","))
            rows.append(r)
    return rows


def bucket_name(r):
    return "%s d=%s %s s=%s bh=%s" % (r["dtype"], r["d"], "causal" if r["causal"] else "full", r["seqlen_bucket"],
                                      r["bh_bucket"])


def value_key(v):
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def ablate(rows, params=None):
    """{param: {bucket: {value: best_of_value / best}}}, the buckets in order."""
    buckets = collections.OrderedDict()
    for r in sorted(rows, key=lambda r: (r["dtype"], r["d"], r["causal"], r["seqlen_bucket"], r["bh_bucket"])):
        buckets.setdefault(bucket_name(r), []).append(r)
    names = params or sorted({p for r in rows for p in r["params"]})
    out = {}
    for p in names:
        table = collections.OrderedDict()
        for b, rs in buckets.items():
            best = min(r["median_ms"] for r in rs)
            by_value = {}
            for r in rs:
                v = r["params"].get(p)
                if v is not None and (v not in by_value or r["median_ms"] < by_value[v]):
                    by_value[v] = r["median_ms"]
            if len(by_value) > 1:  # a parameter the bucket did not vary says nothing
                table[b] = {v: best / ms for v, ms in by_value.items()}
        if table:
            out[p] = table
    return out


def neighbour_search(rows, ks=(1, 2, 4, 8, 16)):
    """How well a bucket's nearest measured neighbour (same dtype, head dim, causality and batch x
    heads class aside, the nearest sequence length) ranks its variants: for each bucket and k,
    the best of the neighbour's k fastest, measured on the bucket itself, against the bucket's
    best (1.000: the top k hold the winner). The question behind a search that screens only a
    neighbour's leaders. Returns [(bucket, neighbour's seqlen, {k: ratio})]."""
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["dtype"], r["d"], r["causal"], r["seqlen_bucket"])][r["variant"]] = r["median_ms"]
    out = []
    for key in sorted(by):
        dtype, d, causal, s = key
        sibs = [k for k in by if k[:3] == key[:3] and k != key]
        if not sibs:
            continue
        nb = min(sibs, key=lambda k: (abs(math.log(k[3] / s)), k[3]))
        own, ref = by[key], by[nb]
        order = sorted((v for v in own if v in ref), key=lambda v: (ref[v], v))
        if not order:
            continue
        best = min(own.values())
        out.append(("%s d=%s %s s=%s" % (dtype, d, "causal" if causal else "full", s), nb[3],
                    {k: best / min(own[v] for v in order[:k]) for k in ks}))
    return out


def selftest():
    """Two buckets of made-up measurements whose answers are known."""
    sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/tests")
    from pycheck import Checks

    c = Checks("ablation selftest")

    def row(seqlen, variant, ms, status="ok", stale=False):
        return {"dtype": "bf16", "d": 64, "causal": 0, "seqlen_bucket": seqlen, "bh_bucket": 32, "variant": variant,
                "median_ms": ms, "status": status, "stale": stale,
                "params": dict(kv.split("=") for kv in variant.split(","))}

    rows = [row(1024, "bn=64,stages=2", 1.0), row(1024, "bn=128,stages=2", 0.8), row(1024, "bn=128,stages=3", 0.9),
            row(4096, "bn=64,stages=2", 2.0), row(4096, "bn=128,stages=2", 2.5)]
    res = ablate(rows)
    c.report(abs(res["bn"]["bf16 d=64 full s=1024 bh=32"]["64"] - 0.8) < 1e-12, "bn=64 at 1k: 0.8 / 1.0")
    c.report(res["bn"]["bf16 d=64 full s=1024 bh=32"]["128"] == 1.0, "bn=128 at 1k: the best")
    c.report(abs(res["bn"]["bf16 d=64 full s=4096 bh=32"]["128"] - 0.8) < 1e-12, "bn=128 at 4k: 2.0 / 2.5")
    c.report(abs(res["stages"]["bf16 d=64 full s=1024 bh=32"]["3"] - 0.8 / 0.9) < 1e-12, "stages=3 at 1k")
    c.report("bf16 d=64 full s=4096 bh=32" not in res["stages"], "a bucket that did not vary stages says nothing")
    c.report(list(ablate(rows, ["bn"])) == ["bn"], "--params chooses")
    nb = dict((b, (n, t)) for b, n, t in neighbour_search(rows, ks=(1, 2)))
    # at 1k the 4k bucket's fastest (bn=64) is 0.8 / 1.0 of the best; its two fastest hold it
    c.report(nb["bf16 d=64 full s=1024"][0] == 4096, "the neighbour of 1k is 4k")
    c.report(abs(nb["bf16 d=64 full s=1024"][1][1] - 0.8) < 1e-12, "neighbour's fastest at 1k: 0.8")
    c.report(nb["bf16 d=64 full s=1024"][1][2] == 1.0, "neighbour's two fastest hold 1k's best")
    # at 4k, 1k's fastest (bn=128) runs 2.5 against bn=64's 2.0
    c.report(abs(nb["bf16 d=64 full s=4096"][1][1] - 0.8) < 1e-12, "neighbour's fastest at 4k: 0.8")
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in rows + [row(1024, "bn=64,stages=3", 0.1, status="wrong_result"), row(1024, "bn=64,stages=3", 0.1,
                                                                                       stale=True)]:
            r = dict(r)
            del r["params"]
            f.write(json.dumps(r) + "\n")
        f.write("not json: skipped\n")
    try:
        c.report(len(load(f.name)) == len(rows), "load keeps ok, non-stale rows and skips other lines")
    finally:
        os.unlink(f.name)
    c.finish()


def main():
    if sys.argv[1:] == ["--selftest"]:
        selftest()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="flashtune query --all --json output, - for stdin")
    ap.add_argument("--params", help="comma-separated parameters (default: every one that varies)")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    ap.add_argument("--neighbour", action="store_true",
                    help="instead: how well each bucket's nearest measured neighbour ranks its variants")
    a = ap.parse_args()
    rows = load(a.jsonl)
    if not rows:
        sys.exit("ablation: no ok measurements in %s" % a.jsonl)
    if a.neighbour:
        res = neighbour_search(rows)
        ks = sorted(res[0][2]) if res else []
        print("| bucket | neighbour's seqlen | %s |" % " | ".join("best of its %d fastest" % k for k in ks))
        print("|---|---|%s" % ("---|" * len(ks)))
        for b, n, t in res:
            print("| %s | %d | %s |" % (b, n, " | ".join("%.3f" % t[k] for k in ks)))
        print("| worst | | %s |" % " | ".join("%.3f" % min(t[k] for _, _, t in res) for k in ks))
        return
    res = ablate(rows, a.params.split(",") if a.params else None)
    for p, table in res.items():
        values = sorted({v for t in table.values() for v in t}, key=value_key)
        if a.markdown:
            print("\n| %s | %s |" % (p, " | ".join(values)))
            print("|---|%s" % ("---|" * len(values)))
        else:
            print("\n%-40s %s" % (p, " ".join("%7s" % v for v in values)))
        for b, t in table.items():
            cells = ["%.3f" % t[v] if v in t else "-" for v in values]
            print(("| %s | %s |" % (b, " | ".join(cells))) if a.markdown else
                  "%-40s %s" % (b, " ".join("%7s" % c for c in cells)))
        gm = []
        for v in values:
            xs = [t[v] for t in table.values() if v in t]
            gm.append("%.3f" % math.exp(sum(map(math.log, xs)) / len(xs)) if xs else "-")
        print(("| geometric mean | %s |" % " | ".join(gm)) if a.markdown else
              "%-40s %s" % ("geometric mean", " ".join("%7s" % g for g in gm)))


if __name__ == "__main__":
    main()
