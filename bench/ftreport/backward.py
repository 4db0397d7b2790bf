"""The backward's part of the report: the JSON of bench/bwd_compare.py (one file per run, e.g. one
per dtype), read as that script writes it, and rendered as the backward's and forward+backward's
TFLOP/s per (dtype, head dim, causal) group (geometric means over seqlen) and per shape, with
flashtune's ratio to every other system. `report.py --bwd-json FILE` includes it."""
import json
import math
import os

from .stats import geomean

ROW_FIELDS = ("system", "dtype", "d", "causal", "seqlen", "bwd_tflops", "fwdbwd_tflops")
MEASURES = (("bwd_tflops", "backward"), ("fwdbwd_tflops", "forward + backward"))


def read_backward(paths):
    """{"runs": [{"path", "device", "torch", "flashtune", "deterministic", "rows"}]} from the
    files; ValueError naming the file and what is wrong with it."""
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError("%s: %s" % (path, e))
        rows = data.get("rows") if isinstance(data, dict) else None
        if not isinstance(rows, list) or not rows:
            raise ValueError("%s: no \"rows\" of bench/bwd_compare.py" % path)
        for i, r in enumerate(rows):
            missing = [k for k in ROW_FIELDS if not isinstance(r, dict) or k not in r]
            if missing:
                raise ValueError("%s: row %d lacks %s" % (path, i, ", ".join(missing)))
            for k in ("bwd_tflops", "fwdbwd_tflops"):
                v = r[k]
                if v is not None and (not isinstance(v, (int, float)) or not v > 0 or math.isinf(v)):
                    raise ValueError("%s: row %d: %s is %r, not a positive number" % (path, i, k, v))
        runs.append({"path": path, "device": data.get("device", "?"), "torch": data.get("torch", "?"),
                     "flashtune": data.get("flashtune", "?"), "deterministic": bool(data.get("deterministic")),
                     "rows": rows})
    return {"runs": runs}


def _fmt(x):
    return "–" if x is None else "%.0f" % x


def _fmt_ratio(x):
    return "–" if x is None else "%.2f" % x


def _systems(rows):
    seen = []
    for r in rows:
        if r["system"] not in seen:
            seen.append(r["system"])
    return (["flashtune"] if "flashtune" in seen else []) + [s for s in seen if s != "flashtune"]


def render_backward(bw):
    """The markdown lines of the backward's section ([] without one)."""
    if not bw or not bw.get("runs"):
        return []
    rows = [r for run in bw["runs"] for r in run["rows"]]
    systems = _systems(rows)
    anchors = [s for s in systems if s != "flashtune"] if "flashtune" in systems else []
    # value[(dtype, d, causal, seqlen)][system] = row
    shapes = {}
    for r in rows:
        shapes.setdefault((r["dtype"], r["d"], r["causal"], r["seqlen"]), {})[r["system"]] = r
    groups = sorted({k[:3] for k in shapes})
    L = ["## Backward (bench/bwd_compare.py)", ""]
    for run in bw["runs"]:
        L.append("- `%s`: %s, PyTorch %s, flashtune %s%s, %d rows." % (
            os.path.relpath(run["path"]) if os.path.isabs(run["path"]) else run["path"], run["device"],
            run["torch"], run["flashtune"], ", deterministic" if run["deterministic"] else "", len(run["rows"])))
    L.append("")
    for field, what in MEASURES:
        L.append("%s%s TFLOP/s, geometric mean over seqlen per group (ratios over the seqlens both systems "
                 "have):" % (what[0].upper(), what[1:]))
        L.append("")
        L.append("| dtype | d | causal | seqlens | %s |%s" % (" | ".join(systems), "".join(
            " flashtune / %s |" % a for a in anchors)))
        L.append("|---|---|---|---|%s%s" % ("---|" * len(systems), "---|" * len(anchors)))
        for g in groups:
            keys = sorted(k for k in shapes if k[:3] == g)
            cells = []
            for s in systems:
                cells.append(_fmt(geomean([shapes[k][s][field] for k in keys
                                            if s in shapes[k] and shapes[k][s][field]])))
            ratios = []
            for a in anchors:
                both = [k for k in keys if "flashtune" in shapes[k] and a in shapes[k] and
                        shapes[k]["flashtune"][field] and shapes[k][a][field]]
                ft, an = (geomean([shapes[k][s][field] for k in both]) for s in ("flashtune", a))
                ratios.append(_fmt_ratio(ft / an if both else None))
            L.append("| %s | %d | %s | %d | %s |%s" % (g[0], g[1], "yes" if g[2] else "no", len(keys),
                                                      " | ".join(cells), "".join(" %s |" % x for x in ratios)))
        L.append("")
    L.append("Backward TFLOP/s per shape:")
    L.append("")
    L.append("| dtype | d | causal | seqlen | b×h | %s |%s" % (" | ".join(systems), "".join(
        " flashtune / %s |" % a for a in anchors)))
    L.append("|---|---|---|---|---|%s%s" % ("---|" * len(systems), "---|" * len(anchors)))
    for k in sorted(shapes):
        v = shapes[k]
        any_row = next(iter(v.values()))
        bh = any_row.get("batch", 0) * any_row.get("heads", 0)
        ft = v.get("flashtune", {}).get("bwd_tflops")
        L.append("| %s | %d | %s | %d | %s | %s |%s" % (
            k[0], k[1], "yes" if k[2] else "no", k[3], bh or "?",
            " | ".join(_fmt(v[s]["bwd_tflops"]) if s in v else "–" for s in systems),
            "".join(" %s |" % _fmt_ratio(ft / v[a]["bwd_tflops"] if ft and a in v and v[a]["bwd_tflops"] else None)
                    for a in anchors)))
    return L + [""]


def selftest(expect, tmp):
    def row(system, causal, seqlen, bwd, fwdbwd):
        return {"system": system, "dtype": "bf16", "d": 128, "causal": causal, "seqlen": seqlen, "batch": 4,
                "heads": 16, "bwd_tflops": bwd, "fwdbwd_tflops": fwdbwd}

    good = os.path.join(tmp, "bwd.json")
    with open(good, "w") as f:
        json.dump({"device": "NVIDIA H200", "torch": "2.11", "flashtune": "0.1.0", "deterministic": False,
                   "rows": [row("flashtune", 0, 1024, 400.0, 410.0), row("cuDNN (SDPA)", 0, 1024, 200.0, 205.0),
                            row("flashtune", 0, 4096, 100.0, 110.0), row("cuDNN (SDPA)", 0, 4096, 400.0, 440.0),
                            row("flashtune", 1, 1024, 300.0, 300.0)]}, f)
    bw = read_backward([good])
    md = "\n".join(render_backward(bw))
    expect("| bf16 | 128 | no | 2 | 200 | 283 | 0.71 |" in md, "backward: geometric means and the ratio per group")
    expect("| bf16 | 128 | yes | 1 | 300 | – | – |" in md, "backward: a system without a group's rows")
    expect("| bf16 | 128 | no | 1024 | 64 | 400 | 200 | 2.00 |" in md, "backward: a shape, b×h and its ratio")
    expect("Forward + backward TFLOP/s" in md and "| bf16 | 128 | no | 2 | 212 | 300 | 0.71 |" in md,
           "backward: the forward + backward table")
    expect(render_backward(None) == [] and render_backward({"runs": []}) == [], "backward: nothing without runs")
    bad = os.path.join(tmp, "bad.json")
    for text, what in (('{"rows": []}', 'no "rows"'), ('{"rows": [{"system": "x"}]}', "lacks"),
                       ('{"rows": [%s]}' % json.dumps(dict(row("x", 0, 512, 1.0, 1.0), bwd_tflops=-1.0)),
                        "not a positive"), ("{", "")):
        with open(bad, "w") as f:
            f.write(text)
        try:
            read_backward([bad])
            ok = False
        except ValueError as e:
            ok = "bad.json" in str(e) and what in str(e)
        expect(ok, "backward: a malformed file refused (%s)" % (what or "not JSON"))
