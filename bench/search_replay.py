#!/usr/bin/env python3
"""A tune's search replayed on measurements made on a GPU, without one: the stand-in worker
(tests/fake_worker.c with FAKE_REPLAY) answers each measurement with the median an exhaustive
tune recorded for that kernel on that shape (`flashtune query --all --json` of its database,
as bench/device_hd8.sh quality and ablate keep them), and `flashtune tune --search S` runs as it
would on the GPU (its candidates compiled here by NVRTC, its choices its own). Each bucket's
winner is then read at the exhaustive tune's median: best / winner's is what the search lost by
not measuring everything (1.0: it found the fastest). With --jitter every replayed median is off
by up to that fraction, so the race's decisions are made through noise, as on a GPU. A dump made before a parameter joined the
spec holds its variants at that parameter's default; the search's variants with other values of
it read as wrong results (the replay lacks them). Measurement noise is not replayed (every
repetition of a kernel reads the same), so this prices the search's coverage only; the GPU's
bench/tune_quality.py prices both.

    python3 bench/search_replay.py --flashtune build/flashtune --worker build/tests/fake_worker \\
        --spec specs/flash_fwd_sm90.lua --dump exhaustive_all.jsonl.gz --only d=80 --out /tmp/replay

Writes OUT/replay.json and prints one line per bucket, then the summary.
"""
import argparse
import gzip
import json
import math
import os
import subprocess
import sys


def load_dump(path):
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("status") == "ok" and not r.get("stale"):
                    rows.append(r)
    return rows


def spec_params(path):
    """The spec's parameters in order, and the defaults of those that have one (a parameter added
    to a spec after a dump was made: the dump's variants lack it, and had its default)."""
    import re
    text = open(path).read()
    names, defaults = [], {}
    for m in re.finditer(r'\{\s*name\s*=\s*"(\w+)"\s*,\s*values\s*=\s*\{[^}]*\}\s*,?\s*(?:default\s*=\s*"?([\w.]+)"?)?',
                         text):
        names.append(m.group(1))
        if m.group(2) is not None:
            defaults[m.group(1)] = m.group(2)
    return names, defaults


def complete(variant, params):
    """A dump's variant in the spec's form: the parameters it lacks at their defaults, in the
    spec's order (unchanged when it lacks one without a default)."""
    names, defaults = params
    have = dict(kv.split("=") for kv in variant.split(","))
    if any(n not in have and n not in defaults for n in names):
        return variant
    return ",".join("%s=%s" % (n, have.get(n, defaults.get(n))) for n in names)


def entry_of(family, variant):
    return "ft_" + family + "_" + variant.replace("=", "").replace(",", "_")


def shape_of(text):
    s = dict(kv.split("=") for kv in text.split(","))
    return [int(s[k]) for k in ("b", "hq", "hkv", "sq", "sk")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashtune", default="build/flashtune")
    ap.add_argument("--worker", default="build/tests/fake_worker")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--family", help="the spec's kernel family (default: the spec file's name)")
    ap.add_argument("--dump", action="append", required=True, help="query --all --json of an exhaustive tune")
    ap.add_argument("--only", action="append", required=True, help="a tune filter; each one tuned in turn")
    ap.add_argument("--search", default="ranked", choices=("halving", "ranked", "exhaustive"))
    ap.add_argument("--jitter", type=float, default=0.0,
                    help="each replayed median off by up to this fraction (the stand-in worker's FAKE_JITTER): "
                         "a GPU's noise, which the race and its decisions must see through")
    ap.add_argument("--refinements", type=int, help="tune --refinements N (default: the tuner's)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    family = a.family or os.path.splitext(os.path.basename(a.spec))[0]
    os.makedirs(a.out, exist_ok=True)

    rows = [r for p in a.dump for r in load_dump(p)]
    params = spec_params(a.spec)
    for r in rows:
        r["variant"] = complete(r["variant"], params)
    best = {}
    ms = {}
    with open(os.path.join(a.out, "replay.txt"), "w") as f:
        for r in rows:
            sh = shape_of(r["shape"])
            f.write("%s %s %.9g\n" % (entry_of(family, r["variant"]), " ".join(map(str, sh)), r["median_ms"]))
            ms[(r["key"], r["variant"])] = r["median_ms"]
            best[r["key"]] = min(best.get(r["key"], math.inf), r["median_ms"])
    env = dict(os.environ, FLASHTUNE_WORKER=a.worker, FAKE_REPLAY=os.path.join(a.out, "replay.txt"), FAKE_COUNT="1")
    if a.jitter > 0:
        env["FAKE_JITTER"] = repr(a.jitter)
    db = os.path.join(a.out, "replay.db")
    if os.path.exists(db):
        os.remove(db)
    tunes = []
    for only in a.only:
        cmd = [a.flashtune, "tune", a.spec, "--db", db, "--only", only, "--search", a.search, "--json", "-q"]
        if a.refinements is not None:
            cmd += ["--refinements", str(a.refinements)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines:
            sys.exit("search_replay: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
        tunes.append(json.loads(lines[-1]))
    p = subprocess.run([a.flashtune, "query", "--db", db, "--json"], capture_output=True, text=True)
    out = []
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        w = json.loads(line)
        if not w.get("winner") or w["key"] not in best or (w["key"], w["variant"]) not in ms:
            continue
        ratio = best[w["key"]] / ms[(w["key"], w["variant"])]
        out.append({"key": w["key"], "shape": w["shape"], "winner": w["variant"], "best_over_winner": ratio})
        print("%-80s %-75s %.3f" % (w["key"], w["variant"], ratio))
    ratios = [r["best_over_winner"] for r in out]
    summary = {
        "buckets": len(out), "worst": min(ratios, default=math.nan),
        "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan,
        "within_2pct": sum(r >= 0.98 for r in ratios),
        "measured": sum(t["measured"] for t in tunes),
        "compiled": sum(t["variants"] - t.get("ranked_out", 0) for t in tunes),
        "variants": sum(t["variants"] for t in tunes),
    }
    with open(os.path.join(a.out, "replay.json"), "w") as f:
        json.dump({"spec": a.spec, "search": a.search, "only": a.only, "dumps": a.dump, "jitter": a.jitter,
                   "summary": summary,
                   "tunes": tunes, "rows": out}, f, indent=1)
    print("search %s: %d buckets, best / winner worst %.3f, geometric mean %.3f, %d within 2 %%; %d measurements, "
          "%d of %d variants compiled" % (a.search, summary["buckets"], summary["worst"], summary["geomean"],
                                          summary["within_2pct"], summary["measured"], summary["compiled"],
                                          summary["variants"]))


if __name__ == "__main__":
    main()
