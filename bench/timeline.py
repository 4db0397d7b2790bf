#!/usr/bin/env python3
"""Where a tune's wall time went, from its `flashtune tune --timeline FILE`: the GPU's busy time
(the union of the measure, refinement-measure and held-race spans) and its idle gaps, each gap
named by what the tuner was doing in it (compiling a group, waiting for compilations ahead), the
compilations ahead's concurrency (how many compiled at once, on average while any did), and per
group its compile, wait and measure seconds.

    python3 bench/timeline.py OUT/fulltune_timeline.jsonl [--gaps 10] [--json OUT.json]

A file whose name ends in .gz is read through gzip (the results folders keep them so).
"""
import argparse
import collections
import gzip
import json
import sys

GPU = ("measure", "measure_refinement", "race_held")


def union(spans):
    """The total length of the union of (start, end) spans, and its pieces in order."""
    pieces = []
    for s, e in sorted(spans):
        if pieces and s <= pieces[-1][1]:
            pieces[-1][1] = max(pieces[-1][1], e)
        else:
            pieces.append([s, e])
    return sum(e - s for s, e in pieces), pieces


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline")
    ap.add_argument("--gaps", type=int, default=10, help="the longest idle gaps of the GPU to list")
    ap.add_argument("--json", help="the summary as JSON here too")
    a = ap.parse_args()
    spans = []
    with (gzip.open(a.timeline, "rt") if a.timeline.endswith(".gz") else open(a.timeline)) as f:
        for n, line in enumerate(f, 1):
            try:
                spans.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{a.timeline}:{n}: not a span: {e}")
    if not spans:
        sys.exit(f"{a.timeline}: no spans")
    wall = max(s["end"] for s in spans)
    busy, pieces = union([(s["start"], s["end"]) for s in spans if s["what"] in GPU])
    gaps = [(0.0, pieces[0][0])] if pieces and pieces[0][0] > 0 else []
    gaps += [(pieces[i][1], pieces[i + 1][0]) for i in range(len(pieces) - 1)]
    if pieces and pieces[-1][1] < wall:
        gaps.append((pieces[-1][1], wall))

    def doing(g0, g1):
        """The tuner thread's spans that overlap gap [g0, g1], longest overlap first."""
        over = collections.Counter()
        for s in spans:
            if s["what"] in ("compile_wait", "ahead_wait") and s["end"] > g0 and s["start"] < g1:
                over[f'{s["what"]} {s["label"]}'] += min(s["end"], g1) - max(s["start"], g0)
        return [f"{k} ({v:.1f} s)" for k, v in over.most_common(2)]

    ahead = [(s["start"], s["end"]) for s in spans if s["what"] == "ahead"]
    ahead_cpu = sum(e - s for s, e in ahead)
    ahead_wall, _ = union(ahead)
    groups = collections.OrderedDict()
    for s in spans:
        if s["what"] == "ahead":
            continue
        g = groups.setdefault(s["label"], collections.Counter())
        g[s["what"]] += s["end"] - s["start"]
    out = {
        "wall_s": wall, "gpu_busy_s": busy, "gpu_idle_s": wall - busy,
        "ahead": {"compilations": len(ahead), "cpu_s": ahead_cpu, "wall_s": ahead_wall,
                  "mean_parallel": ahead_cpu / ahead_wall if ahead_wall > 0 else 0.0},
        "waits_s": {w: sum(s["end"] - s["start"] for s in spans if s["what"] == w) for w in ("compile_wait", "ahead_wait")},
        "gaps": [{"start": g0, "end": g1, "s": g1 - g0, "doing": doing(g0, g1)}
                 for g0, g1 in sorted(gaps, key=lambda g: g[0] - g[1])[:a.gaps]],
        "groups": {k: dict(v) for k, v in groups.items()},
    }
    print(f"wall {wall:.1f} s: GPU busy {busy:.1f} s, idle {wall - busy:.1f} s; waited {out['waits_s']['compile_wait']:.1f} s "
          f"for groups' compilations, {out['waits_s']['ahead_wait']:.1f} s for compilations ahead")
    print(f"compiled ahead: {len(ahead)} kernels, {ahead_cpu:.1f} CPU-s over {ahead_wall:.1f} s "
          f"({out['ahead']['mean_parallel']:.1f} at once on average)")
    print(f"the GPU's {len(out['gaps'])} longest idle gaps:")
    for g in out["gaps"]:
        print(f"  {g['start']:7.1f}-{g['end']:7.1f} s  {g['s']:5.1f} s  {'; '.join(g['doing']) or '(no wait recorded)'}")
    print("per group (s): compile, compile_wait, ahead_wait, measure, measure_refinement, race_held")
    for k, v in groups.items():
        cols = " ".join(f"{v.get(w, 0.0):6.1f}" for w in ("compile", "compile_wait", "ahead_wait", "measure",
                                                            "measure_refinement", "race_held"))
        print(f"  {k:44s} {cols}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
