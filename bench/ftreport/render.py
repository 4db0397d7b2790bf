"""report.md from a report (the dict that report.json holds): the TFLOP/s table with flashtune's
ratios to each anchor, the geometric means per group, where the anchors are ahead, errors and
wrong outputs, flashtune's kernel choice per shape, the GPU memory of one call, first calls, the
cost of a tune, the dispatch overhead and the backward's tables (backward.py); and the cells'
formatting."""
import json

from .backward import render_backward
from .stats import geomean
from .systems import LABELS, ORDER


def flatten(obj, prefix=""):
    """{'a': {'b': 1}} -> [('a.b', 1)] (lists kept whole)."""
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out += flatten(v, "%s.%s" % (prefix, k) if prefix else str(k))
        return out
    return [(prefix, obj)]


def label(report, name):
    forced = report.get("config", {}).get("forced", {})
    return "forced%s" % name[6:] if name in forced else LABELS.get(name, name)


def systems_of(report):
    seen = set()
    for r in report.get("rows", []):
        seen.update(r.get("systems", {}))
    return [s for s in ORDER if s in seen] + sorted(s for s in seen if s not in ORDER)


def tflops_of(row, name):
    """TFLOP/s of a system in a row, or None when it was not timed or its output was wrong."""
    s = row.get("systems", {}).get(name)
    if not s or s.get("tflops") is None or s.get("wrong"):
        return None
    return s["tflops"]


def cell(row, name):
    s = row.get("systems", {}).get(name)
    if not s:
        return "–"
    if s.get("wrong"):
        return "WRONG" + ("" if s.get("tflops") is None else " (%.0f)" % s["tflops"])
    if s.get("tflops") is not None:
        return "%.0f" % s["tflops"]
    if s.get("skipped"):
        return "skip"
    return "err"


def fmt_ratio(x):
    return "–" if x is None else "%.2f" % x


def fmt_bytes(n):
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024


def fmt_s(x):
    if x is None:
        return "–"
    return "%.1f s" % x if x < 120 else "%dm%02ds (%.0f s)" % (x // 60, x % 60, x)


def seq_label(s):
    return "%dk" % (s // 1024) if s >= 1024 and s % 1024 == 0 else str(s)


def ahead_line(report, anchor, rows):
    """Where anchor is ahead of flashtune, and by how much."""
    name = label(report, anchor)
    pairs = [(r, tflops_of(r, anchor) / tflops_of(r, "flashtune")) for r in rows
             if tflops_of(r, anchor) is not None and tflops_of(r, "flashtune") is not None]
    if not pairs:
        return None
    ahead = [(r, x) for r, x in pairs if x > 1.0]
    behind = [(r, x) for r, x in pairs if x <= 1.0]

    def where(r):
        return "%s d=%d %s s=%s" % (r["dtype"], r["d"], "causal" if r["causal"] else "non-causal", seq_label(r["seqlen"]))

    if not ahead:
        return "- %s is ahead of flashtune in none of %d shapes (flashtune ahead by %.2f× geometric mean)." % (
            name, len(pairs), 1.0 / geomean([x for _, x in pairs]))
    xs = [x for _, x in ahead]
    worst = max(ahead, key=lambda p: p[1])
    text = ("- %s is ahead of flashtune in %d of %d shapes, by %.2f× (geometric mean; %.2f–%.2f×, most at %s)" % (
        name, len(ahead), len(pairs), geomean(xs), min(xs), max(xs), where(worst[0])))
    if behind:
        best = min(behind, key=lambda p: p[1])
        text += "; flashtune is ahead in %d (by up to %.2f×, at %s)" % (len(behind), 1.0 / best[1], where(best[0]))
    groups = {}
    for r, x in ahead:
        groups.setdefault((r["dtype"], r["d"], r["causal"]), []).append(x)
    text += ". Ahead by group: " + ", ".join(
        "%s d=%d %s %.2f×" % (dt, d, "causal" if c else "non-causal", geomean(v)) for (dt, d, c), v in sorted(groups.items(), key=lambda g: (g[0][0] != "f16",) + g[0]))
    return text + "."


def render_markdown(report):
    env = report.get("env", {})
    cfg = report.get("config", {})
    rows = report.get("rows", [])
    systems = systems_of(report)
    anchors = [s for s in systems if s != "flashtune"]
    L = []
    L.append("# flashtune against the anchors")
    L.append("")
    gpu = env.get("gpu", {})
    L.append("%s (driver %s, CUDA %s), PyTorch %s, cuDNN %s, Triton %s; %s." % (
        gpu.get("name", "?"), env.get("driver", "?"), env.get("torch_cuda", "?"), env.get("torch", "?"),
        env.get("cudnn", "?"), env.get("triton", "?"), env.get("date", "?")))
    if env.get("templates_sha256"):
        L.append("")
        L.append("Kernel templates (sha256): %s%s." % (", ".join(
            "%s %s" % (k, v[:8]) for k, v in sorted(env["templates_sha256"].items())),
            "; " + env["provenance"] if env.get("provenance") else ""))
    if report.get("parts"):
        L.append("")
        L.append("One run split over %d GPUs of one host, started together: %s." % (len(report["parts"]), "; ".join(
            "part %d on GPU %s (%s), `%s`" % (i + 1, (p.get("gpu") or {}).get("index", "?"), p.get("date", "?"),
                                             p.get("command", "?")) for i, p in enumerate(report["parts"]))))
    if cfg:
        L.append("")
        L.append("%d tokens per batch, hidden %d%s, inputs %s, seed %s. Timing: CUDA events, a %d MiB buffer zeroed "
                 "before each repetition (L2 flushed), %d interleaved rounds of about %g ms per system and shape, "
                 "median over all repetitions (quartiles in report.json). TFLOP/s count 4·b·h·s²·d, halved when "
                 "causal. Outputs checked against an fp64 reference on %d sampled rows per (batch, head) sample; "
                 "WRONG marks a system whose output failed the check." % (
                     cfg.get("tokens", 0), cfg.get("hidden", 0),
                     ", %d query heads per K/V head" % cfg["group"] if cfg.get("group", 1) > 1 else "",
                     cfg.get("layout", "?"), cfg.get("seed"),
                     cfg.get("flush_mib", 0), cfg.get("rounds", 0), cfg.get("rep_ms", 0), cfg.get("check_rows", 0)))
        db = cfg.get("database_used")
        L.append("")
        L.append("flashtune: `flashtune.Context(%s)` (tuning database: %s)." % (
            "database=%r" % cfg.get("database_arg") if cfg.get("database_arg") is not None else "",
            db if db else "none, built-in defaults"))
        for name, v in sorted(cfg.get("forced", {}).items()):
            L.append("%s: `flashtune.Context(variant=%r)`." % (label(report, name), v))
        if "flex" in systems:
            L.append("Flex: `torch.compile(flex_attention, dynamic=False, mode=%r)`, causal through a block mask; "
                     "first call per shape (compile + autotune) in report.json." % cfg.get("flex_mode"))
    L.append("")
    L.append("## TFLOP/s")
    L.append("")
    head = ["dtype", "d", "causal", "seqlen", "b×h"] + [label(report, s) for s in systems] + [
        "ft / %s" % label(report, a) for a in anchors]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for r in rows:
        ft = tflops_of(r, "flashtune")
        ratios = []
        for a in anchors:
            t = tflops_of(r, a)
            ratios.append(fmt_ratio(ft / t if ft is not None and t is not None else None))
        L.append("| " + " | ".join([r["dtype"], str(r["d"]), "yes" if r["causal"] else "no", str(r["seqlen"]),
                                    "%d×%d" % (r["batch"], r["heads"])] + [cell(r, s) for s in systems] + ratios) + " |")
    L.append("")
    L.append("## Geometric means per (dtype, head dim, causal)")
    L.append("")
    head = ["dtype", "d", "causal", "shapes"] + [label(report, s) for s in systems] + [
        "ft / %s" % label(report, a) for a in anchors]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    groups = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["d"], r["causal"]), []).append(r)
    dtype_rank = {"f16": 0, "bf16": 1}
    for (dt, d, c) in sorted(groups, key=lambda g: (dtype_rank.get(g[0], 9), g[0], g[1], g[2])):
        g = groups[(dt, d, c)]
        cells = []
        for s in systems:
            gm = geomean([tflops_of(r, s) for r in g])
            cells.append("–" if gm is None else "%.0f" % gm)
        for a in anchors:
            xs = [tflops_of(r, "flashtune") / tflops_of(r, a) for r in g
                  if tflops_of(r, "flashtune") is not None and tflops_of(r, a) is not None]
            cells.append(fmt_ratio(geomean(xs)))
        L.append("| " + " | ".join([dt, str(d), "yes" if c else "no", str(len(g))] + cells) + " |")
    L.append("")
    lines = [ahead_line(report, a, rows) for a in anchors]
    lines = [x for x in lines if x]
    if lines:
        L.append("## Where the anchors are ahead")
        L.append("")
        # cuDNN first: it is the one to beat.
        L += sorted(lines, key=lambda x: 0 if x.startswith("- cuDNN") else 1)
        L.append("")
    problems = []
    for r in rows:
        for s, v in r.get("systems", {}).items():
            if v.get("wrong") or v.get("error"):
                problems.append("- %s d=%d causal=%d s=%d, %s: %s" % (
                    r["dtype"], r["d"], r["causal"], r["seqlen"], label(report, s),
                    ("WRONG: %s" % json.dumps(v.get("check"))) if v.get("wrong") else v["error"]))
    if problems:
        L.append("## Errors and wrong outputs")
        L.append("")
        L += problems
        L.append("")
    if report.get("skipped_shapes"):
        L.append("Not measured (time budget or stop): %s." % ", ".join(report["skipped_shapes"]))
        L.append("")
    L += render_dispatch(report)
    L += render_memory(report)
    L += render_first_calls(report)
    L += render_tuning_cost(report.get("tuning_cost"))
    L += render_overhead(report.get("overhead"), report.get("overhead_path"))
    L += render_backward(report.get("backward"))
    return "\n".join(L).rstrip() + "\n"


def render_dispatch(report):
    rows = [r for r in report.get("rows", []) if r.get("systems", {}).get("flashtune", {}).get("dispatch")]
    if not rows:
        return []
    L = ["## flashtune's choice per shape", "", "| dtype | d | causal | seqlen | bucket | chosen |", "|---|---|---|---|---|---|"]
    for r in rows:
        s = r["systems"]["flashtune"]
        L.append("| %s | %d | %s | %d | %s | %s |" % (r["dtype"], r["d"], "yes" if r["causal"] else "no", r["seqlen"],
                                                     s.get("bucket", ""), s["dispatch"].replace("|", "\\|")))
    return L + [""]


def render_memory(report):
    rows = [r for r in report.get("rows", []) if r.get("systems", {}).get("flashtune", {}).get("mem")]
    if not rows:
        return []
    systems = [s for s in systems_of(report) if s != "flashtune"]
    L = ["## Extra GPU memory of one call", "",
         "torch.cuda.max_memory_allocated() during one call, less what was allocated before it. flashtune "
         "should allocate O (and the fp32 LSE when asked for it) and nothing else; 'driver' is the device memory "
         "the library itself took (cudaMemGetInfo around a call with O preallocated: 0 after the first call of "
         "a bucket; the first call's figure is module loading). A naive attention materialises the b·h·s² "
         "score matrix (fp32 here).", ""]
    head = ["dtype", "d", "causal", "seqlen", "O", "flashtune", "with LSE", "O + LSE", "only O/LSE", "driver (first / later)"] + [
        label(report, s) for s in systems] + ["naive S (fp32)"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for r in rows:
        m = r["systems"]["flashtune"]["mem"]
        others = [fmt_bytes(r["systems"].get(s, {}).get("mem", {}).get("peak_extra_bytes")) for s in systems]
        L.append("| " + " | ".join([
            r["dtype"], str(r["d"]), "yes" if r["causal"] else "no", str(r["seqlen"]), fmt_bytes(m.get("o_bytes")),
            fmt_bytes(m.get("peak_extra_bytes")), fmt_bytes(m.get("peak_extra_bytes_lse")),
            fmt_bytes((m.get("o_bytes") or 0) + (m.get("lse_bytes") or 0)),
            {True: "yes", False: "NO"}.get(m.get("only_o_lse"), "–"),
            "%s / %s" % (fmt_bytes(m.get("driver_first_call_bytes")), fmt_bytes(m.get("driver_later_call_bytes")))]
            + others + [fmt_bytes(r.get("naive_scores_bytes"))]) + " |")
    return L + [""]


def render_first_calls(report):
    rows = report.get("rows", [])
    systems = systems_of(report)
    if not any(v.get("first_call_s") is not None for r in rows for v in r.get("systems", {}).values()):
        return []
    L = ["## First call per shape (host wall time: kernel choice, loading, compiling, autotuning)", ""]
    head = ["dtype", "d", "causal", "seqlen"] + [label(report, s) for s in systems]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    for r in rows:
        cells = []
        for s in systems:
            v = r.get("systems", {}).get(s, {}).get("first_call_s")
            cells.append("–" if v is None else ("%.1f ms" % (v * 1e3) if v < 1 else "%.2f s" % v))
        L.append("| " + " | ".join([r["dtype"], str(r["d"]), "yes" if r["causal"] else "no", str(r["seqlen"])] + cells) + " |")
    return L + [""]


def render_tuning_cost(tc):
    if not tc:
        return []
    L = ["## Cost of a tune", ""]
    log = tc.get("log")
    if log:
        L.append("From the tune's log (`%s`%s):" % (log.get("path", "?"), ", the sums of its %d tunes" % log["tunes"]
                                                      if log.get("tunes", 1) > 1 else ""))
        L.append("")
        if log.get("device"):
            L.append("- %s: %s buckets, %s variants (%s pruned); %s measured, %s already in the database; "
                     "%s winners (%s near-ties re-measured), %s worker restarts" % (
                         log["device"], log.get("buckets"), log.get("variants"), log.get("pruned"),
                         log.get("measured", "?"), log.get("already_in_database", "?"), log.get("winners", "?"),
                         log.get("near_ties", "?"), log.get("worker_restarts", "?")))
        if log.get("by_status"):
            L.append("- by status: " + ", ".join("%s %d" % (k, v) for k, v in log["by_status"].items()))
        if log.get("wall_s") is not None:
            L.append("- wall %s = compiling %s + verifying %s + timing %s + other %s" % (
                fmt_s(log["wall_s"]), fmt_s(log.get("compile_s")), fmt_s(log.get("verify_s")),
                fmt_s(log.get("timing_s")), fmt_s(log.get("other_s"))))
        if log.get("script_wall_s") is not None:
            L.append("- the script's own clock: %d s (rc %d)" % (log["script_wall_s"], log.get("script_rc", -1)))
        if log.get("interrupted"):
            L.append("- the tune was interrupted: these figures cover only part of the space")
        L.append("")
    if tc.get("log_error"):
        L += ["- tune log: %s" % tc["log_error"], ""]
    db = tc.get("db")
    if db:
        L.append("From the tuning database (`%s`, read through %s):" % (db.get("path"), db.get("source")))
        L.append("")
        k = db.get("kernels")
        if k:
            L.append("- %d compiled kernels recorded (%d with a stored cubin); NVRTC time summed over them %s "
                     "(one thread; the slowest %s)" % (
                         k["rows"], k["with_cubin"], fmt_s((k["compile_ms_sum"] or 0) / 1e3),
                         fmt_s((k["compile_ms_max"] or 0) / 1e3)))
        for d in db.get("devices", []):
            parts = ["- %s: %d results in %s buckets" % (d.get("name"), d.get("results", 0), d.get("buckets", "?"))]
            if d.get("by_status"):
                parts.append(" (" + ", ".join("%s %d" % (s, n) for s, n in d["by_status"].items()) + ")")
            if d.get("timed_gpu_ms") is not None:
                parts.append("; GPU time inside the timed repetitions (Σ median × repetitions) %s over %s repetitions" % (
                    fmt_s(d["timed_gpu_ms"] / 1e3), d.get("repetitions")))
            if d.get("measured_span_s") is not None:
                parts.append("; measured from %s to %s (%s)" % (d["first_measured"], d["last_measured"],
                                                                 fmt_s(d["measured_span_s"])))
            L.append("".join(parts))
        L.append("")
        if db.get("misses"):
            L += ["- %d buckets recorded as misses by the runtime (no tuned winner; see report.json)" % len(db["misses"]), ""]
    if tc.get("db_error"):
        L += ["- tuning database: %s" % tc["db_error"], ""]
    if tc.get("not_available"):
        L.append("Not available:")
        L.append("")
        L += ["- %s" % x for x in tc["not_available"]]
        L.append("")
    return L


def render_overhead(ov, path):
    if ov is None:
        return []
    L = ["## Dispatch overhead and cold start (bench/overhead.c)", ""]
    if path:
        L += ["From `%s`, verbatim:" % path, ""]
    L += ["| field | value |", "|---|---|"]
    for k, v in flatten(ov):
        L.append("| %s | %s |" % (k, json.dumps(v) if not isinstance(v, str) else v.replace("|", "\\|")))
    return L + [""]


def selftest(expect, tmp):
    from .testdata import report_with_db

    rep = report_with_db(tmp)
    md = render_markdown(rep)
    lines = md.splitlines()
    header = next(x for x in lines if x.startswith("| dtype | d | causal | seqlen | b×h"))
    expect(header.count("|") - 1 == 5 + 5 + 4, "table: one column per system and per ratio")
    row = next(x for x in lines if x.startswith("| f16 | 64 | no | 512 |"))
    expect("| 316 | 305 | 514 | 200 | 388 | 1.04 | 0.61 | 1.58 | 0.81 |" in row, "table: TFLOP/s and ratios")
    expect(any(x.startswith("| f16 | 64 | no | 4096 |") and "| err |" in x for x in lines), "table: an error")
    expect(any(x.startswith("| f16 | 64 | no | 16384 |") and "WRONG" in x and x.endswith("| – |") for x in lines),
           "table: a wrong output, no ratio")
    gm = next(x for x in lines if x.startswith("| f16 | 64 | no | 3 |"))
    expect("| 316 | 305 | 514 |" in gm, "geometric means per group")
    cud = next((x for x in lines if x.startswith("- cuDNN is ahead")), "")
    expect("in 23 of 24 shapes" in cud and "flashtune is ahead in 1" in cud, "the line on where cuDNN is ahead")
    expect("| dispatch_ns.median | 2100 |" in md and "a\\|b" in md, "overhead fields verbatim")
    expect("compiling 1.2 s + verifying 20.3 s + timing 4m00s" in md, "tuning cost: the split")
    expect("NVRTC time summed over them 2.4 s" in md, "tuning cost: NVRTC time")
    expect("- NVIDIA H200: 3 results in 2 buckets (ok 2, wrong_result 1); GPU time inside the timed repetitions "
           "(Σ median × repetitions) 0.2 s over 70 repetitions; measured from 2026-11-30 10:01:00 to "
           "2026-11-30 10:05:54 (4m54s (294 s))" in lines, "tuning cost: a device's results")
    expect("- 2 buckets recorded as misses by the runtime (no tuned winner; see report.json)" in lines,
           "tuning cost: the misses")
    expect("only O/LSE" in md and "| 64.0 MiB |" in md, "memory table")
    expect(flatten({"a": {"b": 1, "c": [2]}, "d": "x"}) == [("a.b", 1), ("a.c", [2]), ("d", "x")], "fields flattened")
