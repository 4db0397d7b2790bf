#!/usr/bin/env python3
"""One run, one GPU, the same input tensors: flashtune's tuned dispatch against what users would
pick instead, with every number kept.

Systems (each a column of the report):
  flashtune   flashtune.Context(database=...): the tuned winner of each bucket, the way an
              application calls it (the output allocated by the call)
  forcedN     flashtune.Context(variant=V) for each --variant V (optional)
  fa2         PyTorch scaled_dot_product_attention, SDPBackend.FLASH_ATTENTION forced
  cudnn       ... SDPBackend.CUDNN_ATTENTION forced
  efficient   ... SDPBackend.EFFICIENT_ATTENTION forced (memory-efficient)
  flex        torch.compile(flex_attention, mode=--flex-mode), causal through a block mask
              (optional, --flex: its first call per shape compiles and autotunes, 3.5-21 s on an H200)

Grid (the FlashAttention-2/3 papers'): --tokens per batch (batch = tokens / seqlen), --hidden (heads =
hidden / head_dim), every seqlen x head dim x causal x dtype asked for. FLOPs = 4*b*h*s*s*d,
halved when causal.

Method, per shape: random normal Q, K, V made once; each system is called once (its first
call, timed on the host: kernel selection, compilation, autotuning), its output checked
against an fp64 reference on sampled rows (and flashtune's log-sum-exp too); a system whose
output is wrong is flagged and not timed (unless --time-wrong). Then every system is timed in
--rounds interleaved rounds (the order rotating each round): CUDA events around each call, a
--flush-mib buffer zeroed before each repetition so that L2 holds nothing, an untimed call
before each block. Reported: the median over all repetitions and the quartiles. The extra GPU
memory of one call (torch.cuda.max_memory_allocated) is measured for every system, and for
flashtune also the memory the library itself takes from the driver.

Outputs in --out: report.json (everything, the environment included), report.md, and
tflops_<dtype>.png (TFLOP/s against seqlen, one panel per head dim and causality). The JSON
and the markdown are rewritten after every shape, so a run that is stopped keeps what it
measured. With --tune-log / --db the cost of a tune is reported; with --overhead-json the
fields of that file are included verbatim.

Needs PyTorch with CUDA (and Triton for --flex); matplotlib for the plots. Without a GPU:
--selftest checks the parts that need none, --from-json re-renders an existing report.json.

Examples:
  python3 bench/report.py --out /tmp/report --db tuning.db --tune-log tune.txt
  python3 bench/report.py --out /tmp/report --seqlens 4096 --head-dims 128 --dtypes f16 --flex
  python3 bench/report.py --from-json /tmp/report/report.json --out /tmp/report2
  python3 bench/report.py --selftest
"""
import argparse
import contextlib
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
from flashtune import flops  # noqa: E402 - the binding loads its library only when a context is made

# Display names and the order of the columns. forcedN are added at run time.
LABELS = {"flashtune": "flashtune", "fa2": "FA2", "cudnn": "cuDNN", "efficient": "mem-eff", "flex": "Flex"}
ORDER = ["flashtune", "forced1", "forced2", "forced3", "forced4", "fa2", "cudnn", "efficient", "flex"]
DEFAULT_SYSTEMS = "flashtune,fa2,cudnn,efficient"
# Output check against the fp64 reference: relative L2 error and max abs error per dtype.
# (flashtune's own verification uses 2e-3 / 1.6e-2 relative L2; these leave room for the
# other systems' rounding while an O(1) error of a wrong kernel is far outside.)
TOLERANCE = {"f16": {"rel_l2": 5e-3, "max_abs": 2e-2, "lse": 1e-2},
             "bf16": {"rel_l2": 3e-2, "max_abs": 1e-1, "lse": 5e-2}}


# ---- pure helpers (no torch; --selftest checks them) -----------------------------------------

def geomean(values):
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def quantile(sorted_vals, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_vals:
        return None
    pos = p * (len(sorted_vals) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(times_ms):
    s = sorted(times_ms)
    return {"ms": quantile(s, 0.5), "q1_ms": quantile(s, 0.25), "q3_ms": quantile(s, 0.75),
            "min_ms": s[0] if s else None, "max_ms": s[-1] if s else None, "reps": len(s)}


def pow2_at_least(n, lo):
    p = lo
    while p < n:
        p *= 2
    return p


def bucket_key(dtype, d, causal, batch, heads, seqlen_q, seqlen_k):
    """flashtune's dispatch bucket of a call (tuning_db/db.c ft__db_bucket), as its debug line
    prints it."""
    return "%s d=%d causal=%d seqlen<=%d b*h<=%d" % (
        dtype, d, 1 if causal else 0, pow2_at_least(max(seqlen_q, seqlen_k), 64), pow2_at_least(batch * heads, 1))


DISPATCH_RE = re.compile(r"^flashtune: (\S+ d=\d+ causal=\d seqlen<=\d+ b\*h<=\d+): (.*)$")


def parse_dispatch(text):
    """The FLASHTUNE_DEBUG lines in text: {bucket: how the kernel was chosen}."""
    out = {}
    for line in text.splitlines():
        m = DISPATCH_RE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def parse_duration(text):
    """flashtune's durations (cli_format_duration): '12.3s', '4m54s', '1h02m' -> seconds."""
    text = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)s", text)
    if m:
        return float(m.group(1))
    m = re.fullmatch(r"(\d+)m(\d+)s", text)
    if m:
        return 60.0 * int(m.group(1)) + int(m.group(2))
    m = re.fullmatch(r"(\d+)h(\d+)m", text)
    if m:
        return 3600.0 * int(m.group(1)) + 60.0 * int(m.group(2))
    return None


def parse_tune_log(text):
    """What `flashtune tune` printed (its closing summary), plus bench/device_tune.sh's
    'tune 1: rc=0 in N s' line when present. A log of several tunes (one per head dim, say)
    gives their sums, and "tunes" says how many there were."""
    out = {}

    def add(key, value):
        out[key] = out.get(key, 0) + value if value is not None and out.get(key, 0) is not None else None

    runs = list(re.finditer(r"^tuned (.+?): (\d+) buckets, (\d+) variants \((\d+) pruned\)", text, re.M))
    if runs:
        out["device"] = runs[0].group(1)
        out["tunes"] = len(runs)
    for m in runs:
        add("buckets", int(m.group(2)))
        add("variants", int(m.group(3)))
        add("pruned", int(m.group(4)))
    for m in re.finditer(r"^measured (\d+), already in the database (\d+): (.*)$", text, re.M):
        add("measured", int(m.group(1)))
        add("already_in_database", int(m.group(2)))
        status = out.setdefault("by_status", {})
        for n, k in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", m.group(3)):
            status[k.strip()] = status.get(k.strip(), 0) + int(n)
    for m in re.finditer(r"^winners: (\d+) buckets \((\d+) near-ties re-measured interleaved\); worker restarts: "
                         r"(\d+)", text, re.M):
        add("winners", int(m.group(1)))
        add("near_ties", int(m.group(2)))
        add("worker_restarts", int(m.group(3)))
    for m in re.finditer(r"^time: (\S+) wall; compiling (\S+), verifying (\S+), timing (\S+)", text, re.M):
        for key, g in zip(("wall_s", "compile_s", "verify_s", "timing_s"), m.groups()):
            add(key, parse_duration(g))
    if "wall_s" in out:
        parts = [out["compile_s"], out["verify_s"], out["timing_s"]]
        if out["wall_s"] is not None and None not in parts:
            out["other_s"] = max(0.0, out["wall_s"] - sum(parts))
    for m in re.finditer(r"^tune: compiling (\d+) variants", text, re.M):
        add("compiled_variants", int(m.group(1)))
    m = re.search(r"^database: (\S+)", text, re.M)
    if m:
        out["database"] = m.group(1)
    m = re.search(r"^tune \d+: rc=(-?\d+) in (\d+) s", text, re.M)
    if m:
        out["script_rc"], out["script_wall_s"] = int(m.group(1)), int(m.group(2))
    if re.search(r"^flashtune tune: .*run tune again", text, re.M):
        out["interrupted"] = True
    return out


def _span_s(first, last):
    try:
        a = datetime.datetime.strptime(first, "%Y-%m-%d %H:%M:%S")
        b = datetime.datetime.strptime(last, "%Y-%m-%d %H:%M:%S")
        return (b - a).total_seconds()
    except (TypeError, ValueError):
        return None


def db_cost(path):
    """The tuning cost a database records, read with sqlite3 (tables, not the views: no window
    functions needed). Raises sqlite3.Error when the file cannot be read."""
    if not os.path.exists(path):
        raise sqlite3.OperationalError("no such file: %s" % path)
    uri = "file:%s?mode=ro" % os.path.abspath(path)
    try:
        con = sqlite3.connect(uri, uri=True)
        con.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.Error:  # a read-only directory cannot hold the WAL's -shm: read it as immutable
        con = sqlite3.connect("file:%s?immutable=1" % os.path.abspath(path), uri=True)
    try:
        out = {"source": "sqlite3", "path": path}
        out["application_id"] = con.execute("PRAGMA application_id").fetchone()[0]
        out["schema_version"] = con.execute("PRAGMA user_version").fetchone()[0]
        out["meta"] = {k: v for k, v in con.execute("SELECT key, value FROM meta")}
        k = con.execute("SELECT count(*), count(cubin), count(compile_ms), sum(compile_ms), max(compile_ms), "
                        "min(created_at), max(created_at) FROM kernels").fetchone()
        out["kernels"] = {"rows": k[0], "with_cubin": k[1], "with_compile_ms": k[2],
                          "compile_ms_sum": k[3], "compile_ms_max": k[4],
                          "first_created": k[5], "last_created": k[6], "created_span_s": _span_s(k[5], k[6])}
        devices = []
        for (dev_id, name, cc, sms, driver, nvrtc) in con.execute(
                "SELECT id, name, cc, sms, driver_version, nvrtc_version FROM devices ORDER BY id"):
            d = {"id": dev_id, "name": name, "cc": cc, "sms": sms, "driver_version": driver,
                 "nvrtc_version": nvrtc}
            d["by_status"] = {s: n for s, n in con.execute(
                "SELECT status, count(*) FROM results WHERE device_id = ? GROUP BY status ORDER BY status", (dev_id,))}
            r = con.execute("SELECT count(*), sum(median_ms * repetitions), sum(repetitions), min(measured_at), "
                            "max(measured_at), count(DISTINCT dtype || '/' || head_dim || '/' || causal || '/' || "
                            "seqlen_bucket || '/' || bh_bucket) FROM results WHERE device_id = ?", (dev_id,)).fetchone()
            d.update(results=r[0], timed_gpu_ms=r[1], repetitions=r[2], first_measured=r[3], last_measured=r[4],
                     measured_span_s=_span_s(r[3], r[4]), buckets=r[5])
            c = con.execute("SELECT sum(k.compile_ms), count(DISTINCT k.id) FROM kernels k WHERE k.id IN "
                            "(SELECT kernel_id FROM results WHERE device_id = ?)", (dev_id,)).fetchone()
            d["compile_ms_sum_of_its_kernels"], d["kernels"] = c[0], c[1]
            d["groups"] = [
                {"dtype": g[0], "d": g[1], "causal": g[2], "buckets": g[3], "results": g[4], "ok": g[5],
                 "timed_gpu_ms": g[6]}
                for g in con.execute(
                    "SELECT dtype, head_dim, causal, count(DISTINCT seqlen_bucket || '/' || bh_bucket), count(*), "
                    "sum(status = 'ok'), sum(median_ms * repetitions) FROM results WHERE device_id = ? "
                    "GROUP BY dtype, head_dim, causal ORDER BY dtype, head_dim, causal", (dev_id,))]
            d["winners"] = [
                {"dtype": w[0], "d": w[1], "causal": w[2], "seqlen_bucket": w[3], "bh_bucket": w[4],
                 "variant": w[5], "median_ms": w[6], "tflops": w[7], "shape": "b=%d,hq=%d,sq=%d" % (w[8], w[9], w[10])}
                for w in con.execute(
                    "SELECT r.dtype, r.head_dim, r.causal, r.seqlen_bucket, r.bh_bucket, k.variant, r.median_ms, "
                    "r.tflops, r.batch, r.heads_q, r.seqlen_q FROM results r JOIN kernels k ON k.id = r.kernel_id "
                    "WHERE r.device_id = ? AND r.status = 'ok' AND r.median_ms IS NOT NULL AND r.median_ms = ("
                    " SELECT min(r2.median_ms) FROM results r2 WHERE r2.device_id = r.device_id AND r2.status = 'ok' "
                    " AND r2.dtype = r.dtype AND r2.head_dim = r.head_dim AND r2.causal = r.causal AND "
                    " r2.seqlen_bucket = r.seqlen_bucket AND r2.bh_bucket = r.bh_bucket) "
                    "GROUP BY r.dtype, r.head_dim, r.causal, r.seqlen_bucket, r.bh_bucket "
                    "ORDER BY r.dtype, r.head_dim, r.causal, r.seqlen_bucket, r.bh_bucket", (dev_id,))]
            devices.append(d)
        out["devices"] = devices
        tables = {t for (t,) in con.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if "misses" in tables:  # schema 2: buckets the runtime found no tuned winner for
            out["misses"] = [{"dtype": m[0], "d": m[1], "causal": m[2], "seqlen_bucket": m[3], "bh_bucket": m[4],
                              "fallback": m[5], "count": m[6]}
                             for m in con.execute("SELECT dtype, head_dim, causal, seqlen_bucket, bh_bucket, fallback, "
                                                  "count FROM misses ORDER BY dtype, head_dim, causal, seqlen_bucket")]
        return out
    finally:
        con.close()


def db_cost_from_query(flashtune_bin, path):
    """Fallback when Python's SQLite cannot read the file: `flashtune query --all --json`."""
    res = subprocess.run([flashtune_bin, "query", "--db", path, "--all", "--json"], capture_output=True,
                         text=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError((res.stderr or res.stdout).strip().splitlines()[-1:] or "flashtune query failed")
    devices = {}
    for line in res.stdout.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        d = devices.setdefault(r["device"], {"name": r["device"], "by_status": {}, "results": 0, "timed_median_ms": 0.0,
                                             "first_measured": None, "last_measured": None, "winners": []})
        d["results"] += 1
        d["by_status"][r["status"]] = d["by_status"].get(r["status"], 0) + 1
        if r.get("median_ms") is not None:
            d["timed_median_ms"] += r["median_ms"]
        t = r.get("measured_at")
        if t:
            d["first_measured"] = min(filter(None, [d["first_measured"], t]))
            d["last_measured"] = max(filter(None, [d["last_measured"], t]))
        if r.get("winner"):
            d["winners"].append({"dtype": r["dtype"], "d": r["d"], "causal": r["causal"],
                                 "seqlen_bucket": r["seqlen_bucket"], "bh_bucket": r["bh_bucket"],
                                 "variant": r["variant"], "median_ms": r.get("median_ms"), "tflops": r.get("tflops")})
    for d in devices.values():
        d["measured_span_s"] = _span_s(d["first_measured"], d["last_measured"])
    return {"source": "flashtune query --all --json", "path": path, "devices": list(devices.values())}


def tuning_cost(tune_log=None, db=None, flashtune_bin=None):
    """The tune's cost from whatever is given, and a list of what is not available."""
    out = {"not_available": []}
    if tune_log:
        try:
            with open(tune_log, errors="replace") as f:
                out["log"] = parse_tune_log(f.read())
            out["log"]["path"] = tune_log
            if "wall_s" not in out["log"]:
                out["not_available"].append("the tune log has no 'time:' summary line (an interrupted or older tune)")
        except OSError as e:
            out["log_error"] = str(e)
    else:
        out["not_available"].append("wall time split into compile / verify / time: no --tune-log given "
                                     "(only `flashtune tune` prints it; the database does not record it)")
    if db:
        try:
            out["db"] = db_cost(db)
        except sqlite3.Error as e:
            out["db_error"] = "sqlite3 %s: %s" % (sqlite3.sqlite_version, e)
            if flashtune_bin and os.path.exists(flashtune_bin):
                try:
                    out["db"] = db_cost_from_query(flashtune_bin, db)
                except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as e2:
                    out["db_error"] += "; flashtune query: %s" % e2
    out["not_available"] += [
        "verification time: not recorded in the database (only the tune log's 'verifying' figure)",
        "compile wall time with -j threads: the database keeps each kernel's own NVRTC time (kernels.compile_ms, "
        "also for cache hits the time of the original compile), whose sum is single-thread CPU time",
        "warm-up, L2 flushes, reference set-up and worker start-up: not recorded; the span of results.measured_at "
        "(1 s resolution) bounds the measuring phase from below",
    ]
    return out


def flatten(obj, prefix=""):
    """{'a': {'b': 1}} -> [('a.b', 1)] (lists kept whole)."""
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out += flatten(v, "%s.%s" % (prefix, k) if prefix else str(k))
        return out
    return [(prefix, obj)]


# ---- rendering ---------------------------------------------------------------------------------

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
        L.append("%d tokens per batch, hidden %d, inputs %s, seed %s. Timing: CUDA events, a %d MiB buffer zeroed "
                 "before each repetition (L2 flushed), %d interleaved rounds of about %g ms per system and shape, "
                 "median over all repetitions (quartiles in report.json). TFLOP/s count 4·b·h·s²·d, halved when "
                 "causal. Outputs checked against an fp64 reference on %d sampled rows per (batch, head) sample; "
                 "WRONG marks a system whose output failed the check." % (
                     cfg.get("tokens", 0), cfg.get("hidden", 0), cfg.get("layout", "?"), cfg.get("seed"),
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


def make_plots(report, out_dir):
    """TFLOP/s against seqlen, one figure per dtype, one panel per (head dim, causal), one line per
    system (the band: TFLOP/s at the quartiles of the time). Returns the files written, or []
    when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = report.get("rows", [])
    systems = systems_of(report)
    written = []
    for dtype in sorted({r["dtype"] for r in rows}, key=lambda x: (x != "f16", x)):
        rs = [r for r in rows if r["dtype"] == dtype]
        dims = sorted({r["d"] for r in rs})
        causals = sorted({r["causal"] for r in rs})
        fig, axes = plt.subplots(len(dims), len(causals), figsize=(5.5 * len(causals), 3.6 * len(dims)),
                                 squeeze=False, sharex=True)
        for i, d in enumerate(dims):
            for j, c in enumerate(causals):
                ax = axes[i][j]
                pts = sorted((r for r in rs if r["d"] == d and r["causal"] == c), key=lambda r: r["seqlen"])
                for s in systems:
                    xs, ys, lo, hi = [], [], [], []
                    for r in pts:
                        t = tflops_of(r, s)
                        if t is None:
                            continue
                        v = r["systems"][s]
                        xs.append(r["seqlen"])
                        ys.append(t)
                        lo.append(r["flops"] / v["q3_ms"] / 1e9 if v.get("q3_ms") else t)
                        hi.append(r["flops"] / v["q1_ms"] / 1e9 if v.get("q1_ms") else t)
                    if not xs:
                        continue
                    style = {"linewidth": 2.4, "zorder": 5} if s == "flashtune" else {"linewidth": 1.4}
                    line, = ax.plot(xs, ys, marker="o", markersize=4, label=label(report, s), **style)
                    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
                ax.set_xscale("log", base=2)
                seqs = sorted({r["seqlen"] for r in pts})
                if seqs:
                    ax.set_xticks(seqs)
                    ax.set_xticklabels([seq_label(x) for x in seqs])
                    ax.minorticks_off()
                ax.set_ylim(bottom=0)
                ax.grid(True, alpha=0.3)
                ax.set_title("%s, d=%d, %s" % (dtype, d, "causal" if c else "non-causal"), fontsize=10)
                if j == 0:
                    ax.set_ylabel("TFLOP/s")
                if i == len(dims) - 1:
                    ax.set_xlabel("seqlen (batch = %d / seqlen)" % report.get("config", {}).get("tokens", 16384))
        handles, labels_ = [], []
        for row_axes in axes:
            for ax in row_axes:
                for h, l in zip(*ax.get_legend_handles_labels()):
                    if l not in labels_:
                        handles.append(h)
                        labels_.append(l)
        height = fig.get_figheight()
        gpu = report.get("env", {}).get("gpu", {}).get("name", "")
        fig.suptitle("Forward attention, %s, %s (band: quartiles)" % (dtype, gpu), y=1 - 0.1 / height, fontsize=11)
        if handles:
            fig.legend(handles, labels_, loc="upper center", ncol=len(handles), frameon=False,
                       bbox_to_anchor=(0.5, 1 - 0.38 / height))
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / height))
        path = os.path.join(out_dir, "tflops_%s.png" % dtype)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def write_outputs(report, out_dir, plots=False):
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, ".report.json.tmp")
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(tmp, os.path.join(out_dir, "report.json"))
    if plots:
        files = make_plots(report, out_dir)
        report["plots"] = [os.path.basename(p) for p in files] or "matplotlib missing: no plots"
    md = render_markdown(report)
    if report.get("plots"):
        if isinstance(report["plots"], list):
            md += "\n## Plots\n\n" + "\n".join("![%s](%s)" % (p, p) for p in report["plots"]) + "\n"
        else:
            md += "\n(%s)\n" % report["plots"]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(md)
    if plots:  # the plot list is part of the JSON too
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1, default=str)
        os.replace(tmp, os.path.join(out_dir, "report.json"))


# ---- the GPU part ------------------------------------------------------------------------------

class Stop(BaseException):
    """SIGTERM (timeout) or SIGINT: write what was measured and leave."""


def _on_signal(signum, frame):
    raise Stop("signal %d" % signum)


def templates_sha256():
    """sha256 of each kernel template of the checkout, by file name."""
    out = {}
    tdir = os.path.join(REPO, "templates")
    for name in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
        if name.endswith(".cuh"):
            with open(os.path.join(tdir, name), "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def environment(torch, args):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
           "python": platform.python_version(), "platform": platform.platform(), "host": platform.node(),
           "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    for mod in ("triton", "numpy", "matplotlib"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - any import failure means "not there"
            env[mod] = None
    p = torch.cuda.get_device_properties(args.device)
    env["gpu"] = {"name": p.name, "cc": "%d.%d" % (p.major, p.minor), "sms": p.multi_processor_count,
                  "memory_bytes": p.total_memory, "l2_bytes": getattr(p, "L2_cache_size", None)}
    # nvidia-smi numbers the GPUs of the host; CUDA_VISIBLE_DEVICES may renumber them for CUDA.
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    smi_index = visible[args.device] if args.device < len(visible) and visible[args.device].isdigit() else str(
        args.device)
    env["gpu"]["index"] = int(smi_index) if smi_index.isdigit() else smi_index
    try:
        q = subprocess.run(["nvidia-smi", "-i", smi_index, "--query-gpu=driver_version,clocks.sm,clocks.max.sm,"
                            "clocks.mem,power.limit,temperature.gpu,persistence_mode", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        f = [x.strip() for x in q.stdout.strip().split(",")]
        if q.returncode == 0 and len(f) >= 7:
            env["driver"] = f[0]
            env["nvidia_smi"] = dict(zip(["driver", "clock_sm", "clock_sm_max", "clock_mem", "power_limit",
                                          "temperature", "persistence"], f))
    except (OSError, subprocess.SubprocessError):
        env["driver"] = None
    try:
        import flashtune
        env["flashtune_lib"] = flashtune.library_path()
        env["flashtune_version"] = flashtune.version()
    except Exception as e:  # noqa: BLE001
        env["flashtune_version"] = "unknown (%s)" % e
    try:
        g = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        env["git_commit"] = g.stdout.strip() if g.returncode == 0 else None
        g = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, timeout=10)
        env["git_modified"] = g.stdout.split("\n")[:-1] if g.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        env["git_commit"] = None
    # The kernels that ran come from these files (a checkout may not have the commit's history).
    env["templates_sha256"] = templates_sha256()
    return env


@contextlib.contextmanager
def capture_stderr_fd():
    """Captures what C code writes to file descriptor 2 (flashtune's FLASHTUNE_DEBUG lines), and
    echoes it afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    tmp = tempfile.TemporaryFile()
    os.dup2(tmp.fileno(), 2)
    box = {"text": ""}
    try:
        yield box
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        tmp.seek(0)
        box["text"] = tmp.read().decode(errors="replace")
        tmp.close()
        if box["text"]:
            sys.stderr.write(box["text"])
            sys.stderr.flush()


class Timer:
    """Interleaved CUDA-event timing with an L2 flush before each repetition."""

    def __init__(self, torch, args):
        self.torch = torch
        self.flush = torch.empty(args.flush_mib << 20, dtype=torch.int8, device="cuda")
        self.args = args

    def estimate(self, fn):
        torch = self.torch
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        torch.cuda.synchronize()
        s.record()
        for _ in range(3):
            fn()
        e.record()
        torch.cuda.synchronize()
        est = max(s.elapsed_time(e) / 3, 1e-3)
        for _ in range(min(200, int(self.args.warmup_ms / est))):
            fn()
        torch.cuda.synchronize()
        return est

    def run(self, fns):
        """fns: {name: callable}. Returns {name: stats or {'error': ...}}."""
        torch, a = self.torch, self.args
        out, per_round, times, medians = {}, {}, {}, {}
        for name, fn in list(fns.items()):
            try:
                est = self.estimate(fn)
            except Exception as e:  # noqa: BLE001 - a failing system must not end the run
                out[name] = {"error": "timing: %s" % first_line(e)}
                del fns[name]
                continue
            per_round[name] = max(a.min_reps, min(a.max_reps, int(a.rep_ms / a.rounds / est)))
            times[name], medians[name] = [], []
        names = list(fns)
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)] if names else []
            for name in order:
                if name in out:
                    continue
                fn, n = fns[name], per_round[name]
                try:
                    fn()  # untimed, after the previous system
                    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
                    for s, e in ev:
                        self.flush.zero_()
                        s.record()
                        fn()
                        e.record()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001
                    out[name] = {"error": "timing: %s" % first_line(e)}
                    continue
                ts = [s.elapsed_time(e) for s, e in ev]
                times[name] += ts
                medians[name].append(summarize(ts)["ms"])
        for name in names:
            if name not in out:
                out[name] = summarize(times[name])
                out[name]["round_medians_ms"] = medians[name]
        return out


def first_line(e):
    text = str(e).strip()
    return (text.splitlines() or [type(e).__name__])[0][:400]


def run(args):
    try:
        import torch
    except ImportError:
        sys.exit("report.py: PyTorch is not installed here (--selftest and --from-json need none)")
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashtune

    if not torch.cuda.is_available():
        sys.exit("report.py: no GPU visible to PyTorch")
    torch.cuda.set_device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    os.environ["FLASHTUNE_DEBUG"] = "1"  # read by the library at each kernel choice

    dtypes_t = {"f16": torch.float16, "bf16": torch.bfloat16}
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.flex and "flex" not in systems:
        systems.append("flex")
    forced = {"forced%d" % (i + 1): v for i, v in enumerate(args.variant or [])}
    systems = systems[:1] + list(forced) + systems[1:] if systems[:1] == ["flashtune"] else list(forced) + systems
    bad = [s for s in systems if s not in LABELS and s not in forced]
    if bad:
        sys.exit("report.py: unknown system(s) %s (known: %s)" % (", ".join(bad), ", ".join(LABELS)))

    t_start = time.time()
    env = environment(torch, args)
    print("# %s, driver %s, torch %s (CUDA %s, cuDNN %s), triton %s, %s" % (
        env["gpu"]["name"], env.get("driver"), env["torch"], env["torch_cuda"], env["cudnn"], env["triton"],
        env["date"]), flush=True)

    if args.no_db:
        db_arg = ""
    else:
        db_arg = args.db  # None: $FLASHTUNE_DB, else the default path, when it exists
    if db_arg == "":
        db_used = None
    elif db_arg:
        db_used = db_arg
    else:
        default = os.environ.get("FLASHTUNE_DB") or os.path.join(
            os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "flashtune", "tuning.db")
        db_used = default if os.path.exists(default) else None
    config = {k: getattr(args, k) for k in ("tokens", "hidden", "layout", "seed", "flush_mib", "rounds", "rep_ms",
                                            "min_reps", "max_reps", "warmup_ms", "check_rows", "tol_scale",
                                            "flex_mode", "flex_budget", "budget", "spec")}
    config.update(systems=systems, forced=forced, database_arg=db_arg, database_used=db_used,
                  tolerance={k: {m: t * args.tol_scale for m, t in v.items()} for k, v in TOLERANCE.items()},
                  command=" ".join(sys.argv))
    report = {"env": env, "config": config, "rows": [], "dispatch": {}, "skipped_shapes": []}
    if args.tune_log or args.db:
        report["tuning_cost"] = tuning_cost(args.tune_log, args.db, args.flashtune)
    if args.overhead_json:
        report["overhead_path"] = args.overhead_json
        try:
            with open(args.overhead_json) as f:
                report["overhead"] = json.load(f)
        except (OSError, ValueError) as e:
            report["overhead"] = {"error": "cannot read %s: %s" % (args.overhead_json, e)}

    contexts = {}
    try:
        if "flashtune" in systems:
            contexts["flashtune"] = flashtune.Context(device=args.device, database=db_arg, spec=args.spec)
        for name, v in forced.items():
            contexts[name] = flashtune.Context(device=args.device, variant=v, database="", spec=args.spec)
    except flashtune.FlashtuneError as e:
        sys.exit("report.py: flashtune.Context: %s" % e)

    flex_fn, flex_state, block_masks = None, {"spent": 0.0}, {}
    if "flex" in systems:
        try:
            import torch._dynamo
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: F401
            cfg = torch._dynamo.config
            for key, val in (("cache_size_limit", 4096), ("recompile_limit", 4096),
                             ("accumulated_cache_size_limit", 65536), ("accumulated_recompile_limit", 65536)):
                if hasattr(cfg, key):
                    setattr(cfg, key, val)
            flex_fn = torch.compile(flex_attention, dynamic=False, mode=args.flex_mode)
        except Exception as e:  # noqa: BLE001
            report["flex_error"] = first_line(e)
            print("flex: %s" % report["flex_error"], flush=True)
            systems.remove("flex")

    timer = Timer(torch, args)
    shapes = []
    for dt in args.dtypes.split(","):
        for d in [int(x) for x in args.head_dims.split(",")]:
            for c in [int(x) for x in args.causal.split(",")]:
                for s in [int(x) for x in args.seqlens.split(",")]:
                    if args.hidden % d or args.tokens < s:
                        print("skipping %s d=%d s=%d: hidden %% d or tokens < seqlen" % (dt, d, s), flush=True)
                        continue
                    shapes.append((dt, d, c, s))

    def sdpa_call(backend, q, k, v, causal):
        def fn():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        return fn

    backends = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        for idx, (dt, d, causal, s) in enumerate(shapes):
            if args.budget and time.time() - t_start > args.budget:
                report["skipped_shapes"] += ["%s d=%d causal=%d s=%d" % x for x in shapes[idx:]]
                print("time budget of %d s spent: %d shapes left out" % (args.budget, len(shapes) - idx), flush=True)
                break
            row = measure_shape(torch, flashtune, args, report, timer, contexts, systems, backends, sdpa_call,
                                dtypes_t[dt], dt, d, causal, s, flex_fn, block_masks, flex_state)
            report["rows"].append(row)
            write_outputs(report, args.out)
    except Stop as e:
        report["stopped"] = str(e)
        print("stopped (%s): writing what was measured" % e, flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        report["wall_s"] = time.time() - t_start
        write_outputs(report, args.out, plots=not args.no_plots)
        for c in contexts.values():
            c.close()
    print("wrote %s" % ", ".join(os.path.join(args.out, f) for f in sorted(os.listdir(args.out))), flush=True)
    return report


def reference(torch, q, k, v, causal, rows_n, scale):
    """fp64 attention on sampled rows of sampled (batch, head) pairs; q/k/v in [b, h, s, d]."""
    b, h, s, _ = q.shape
    rows = torch.unique(torch.linspace(0, s - 1, min(rows_n, s), device=q.device).round().long())
    ref = {}
    for bi in sorted({0, b - 1}):
        for hi in sorted({0, h // 2, h - 1}):
            qf = q[bi, hi].index_select(0, rows).double()
            kf, vf = k[bi, hi].double(), v[bi, hi].double()
            sc = (qf @ kf.T) * scale
            if causal:  # square: top-left and bottom-right alignment agree
                cols = torch.arange(s, device=q.device)
                sc = sc.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            lse = torch.logsumexp(sc, dim=-1)
            ref[(bi, hi)] = (torch.exp(sc - lse[:, None]) @ vf, lse)
    return rows, ref


def check(torch, out_bhsd, lse, rows, ref, tol):
    """Errors of one output against the reference; 'ok' against tol."""
    err2 = ref2 = 0.0
    max_abs = lse_err = 0.0
    finite = True
    for (bi, hi), (ro, rl) in ref.items():
        o = out_bhsd[bi, hi].index_select(0, rows).double()
        finite = finite and bool(torch.isfinite(o).all())
        diff = (o - ro)
        err2 += float((diff * diff).sum())
        ref2 += float((ro * ro).sum())
        max_abs = max(max_abs, float(diff.abs().max()))
        if lse is not None:
            lse_err = max(lse_err, float((lse[bi, hi].index_select(0, rows).double() - rl).abs().max()))
    rel = math.sqrt(err2 / ref2) if ref2 > 0 else math.sqrt(err2)
    res = {"rel_l2": rel, "max_abs": max_abs, "finite": finite}
    ok = finite and rel <= tol["rel_l2"] and max_abs <= tol["max_abs"]
    if lse is not None:
        res["lse_max_abs"] = lse_err
        ok = ok and lse_err <= tol["lse"]
    res["ok"] = bool(ok)
    return res


def measure_shape(torch, flashtune, args, report, timer, contexts, systems, backends, sdpa_call, tdtype, dt, d,
                  causal, s, flex_fn, block_masks, flex_state):
    b, h = args.tokens // s, args.hidden // d
    fl = flops(b, h, s, s, d, causal)
    elt = torch.tensor([], dtype=tdtype).element_size()
    row = {"dtype": dt, "d": d, "causal": causal, "seqlen": s, "batch": b, "heads": h, "flops": fl,
           "naive_scores_bytes": b * h * s * s * 4, "systems": {}}
    tol = report["config"]["tolerance"][dt]
    torch.manual_seed(args.seed + 1000003 * s + 1009 * d + 7 * causal + (dt == "bf16"))
    if args.layout == "bhsd":
        q, k, v = (torch.randn(b, h, s, d, dtype=tdtype, device="cuda") for _ in range(3))
        qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # [b, s, h, d] views for flashtune
    else:
        qs, ks, vs = (torch.randn(b, s, h, d, dtype=tdtype, device="cuda") for _ in range(3))
        q, k, v = (t.transpose(1, 2) for t in (qs, ks, vs))
    scale = 1.0 / math.sqrt(d)
    rows_idx, ref = reference(torch, q, k, v, causal, args.check_rows, scale)
    o_bytes, lse_bytes = b * s * h * d * elt, b * h * s * 4

    fns, outs = {}, {}
    for name in systems:
        rec = row["systems"].setdefault(name, {})
        try:
            if name in contexts:
                ctx = contexts[name]
                pre = torch.empty(b, s, h, d, dtype=tdtype, device="cuda")
                torch.cuda.synchronize()
                free0 = torch.cuda.mem_get_info()[0]
                t0 = time.perf_counter()
                with capture_stderr_fd() as cap:
                    ctx.forward(qs, ks, vs, causal=causal, out=pre)
                    torch.cuda.synchronize()
                rec["first_call_s"] = time.perf_counter() - t0
                free1 = torch.cuda.mem_get_info()[0]
                ctx.forward(qs, ks, vs, causal=causal, out=pre)
                torch.cuda.synchronize()
                free2 = torch.cuda.mem_get_info()[0]
                seen = report["dispatch"].setdefault(name, {})  # every choice this context made
                seen.update(parse_dispatch(cap["text"]))
                key = bucket_key(dt, d, causal, b, h, s, s)
                rec["bucket"] = key
                if key in seen:
                    rec["dispatch"] = seen[key]
                o, lse = ctx.forward(qs, ks, vs, causal=causal, return_lse=True)
                torch.cuda.synchronize()
                rec["check"] = check(torch, o.transpose(1, 2), lse, rows_idx, ref, tol)
                outs[name] = o.transpose(1, 2)
                del o, lse, pre
                peak, kept = mem_peak(torch, lambda: ctx.forward(qs, ks, vs, causal=causal))
                peak_lse, _ = mem_peak(torch, lambda: ctx.forward(qs, ks, vs, causal=causal, return_lse=True))
                rec["mem"] = {"o_bytes": o_bytes, "lse_bytes": lse_bytes, "peak_extra_bytes": peak,
                              "retained_bytes": kept, "peak_extra_bytes_lse": peak_lse,
                              "driver_first_call_bytes": free0 - free1, "driver_later_call_bytes": free1 - free2,
                              "only_o_lse": peak <= o_bytes and peak_lse <= o_bytes + lse_bytes and free1 == free2}
                fns[name] = (lambda c=ctx: c.forward(qs, ks, vs, causal=causal))
            elif name in backends:
                fn = sdpa_call(backends[name], q, k, v, causal)
                with warnings.catch_warnings(record=True) as warned:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    try:
                        o = fn()
                        torch.cuda.synchronize()
                    except RuntimeError as e:
                        why = "; ".join(sorted({str(w.message).splitlines()[0][:200] for w in warned}))
                        raise RuntimeError("%s%s" % (first_line(e), (" (" + why + ")") if why else ""))
                rec["first_call_s"] = time.perf_counter() - t0
                rec["check"] = check(torch, o, None, rows_idx, ref, tol)
                outs[name] = o
                del o
                rec["mem"] = {"peak_extra_bytes": mem_peak(torch, fn)[0]}
                fns[name] = fn
            elif name == "flex":
                if args.flex_budget and flex_state["spent"] > args.flex_budget:
                    rec.update(skipped=True, error="flex time budget (%d s) spent" % args.flex_budget)
                    continue
                if causal not in block_masks.setdefault(s, {}):
                    from torch.nn.attention.flex_attention import create_block_mask

                    def causal_mask(bb, hh, qi, ki):
                        return qi >= ki
                    block_masks[s][causal] = (create_block_mask(causal_mask, None, None, s, s, device="cuda")
                                              if causal else None)
                bm = block_masks[s][causal]
                fn = (lambda bm=bm: flex_fn(q, k, v, block_mask=bm))
                t0 = time.perf_counter()
                try:
                    o = fn()
                    torch.cuda.synchronize()
                finally:
                    flex_state["spent"] += time.perf_counter() - t0
                rec["first_call_s"] = time.perf_counter() - t0
                rec["check"] = check(torch, o, None, rows_idx, ref, tol)
                outs[name] = o
                del o
                rec["mem"] = {"peak_extra_bytes": mem_peak(torch, fn)[0]}
                fns[name] = fn
        except Stop:
            raise
        except Exception as e:  # noqa: BLE001 - one system failing must not end the run
            rec["error"] = first_line(e)
            fns.pop(name, None)
            continue
        if not rec["check"]["ok"]:
            rec["wrong"] = True
            if not args.time_wrong:
                fns.pop(name, None)
    if "fa2" in outs:
        ref_full = outs["fa2"].float()
        for name, o in outs.items():
            if name != "fa2":
                row["systems"][name]["check"]["max_abs_vs_fa2"] = float((o.float() - ref_full).abs().max())
        del ref_full
    outs.clear()

    for name, st in timer.run(fns).items():
        rec = row["systems"][name]
        rec.update(st)
        if st.get("ms"):
            rec["tflops"] = fl / st["ms"] / 1e9
    ft = tflops_of(row, "flashtune")
    row["ratios"] = {a: ft / tflops_of(row, a) for a in row["systems"]
                     if a != "flashtune" and ft is not None and tflops_of(row, a) is not None}
    print("%-4s d=%-3d causal=%d s=%-5d b*h=%-4d %s" % (dt, d, causal, s, b * h, "  ".join(
        "%s %s" % (label(report, n), cell(row, n)) for n in systems if n in row["systems"])) +
          ("  " + " ".join("ft/%s %.2f" % (label(report, a), x) for a, x in row["ratios"].items())
           if row["ratios"] else ""), flush=True)
    return row


def mem_peak(torch, fn):
    """Bytes allocated at the peak of one call beyond what was allocated before it, and bytes the
    call leaves allocated (its output) once it is dropped... measured before the drop."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    r = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    kept = torch.cuda.memory_allocated() - base
    del r
    return peak, kept


# ---- self-test (no GPU, no torch) --------------------------------------------------------------

SAMPLE_TUNE_LOG = """tune: compiling 1560 variants
tuned NVIDIA H200: 96 buckets, 1560 variants (1896 pruned)
measured 5920, already in the database 0: 5900 ok, 12 wrong result, 0 compile error, 8 over limits, 0 launch failure, 0 fault, 0 timeout
winners: 96 buckets (17 near-ties re-measured interleaved); worker restarts: 0
time: 4m54s wall; compiling 1.2s, verifying 20.3s, timing 4m00s
database: /tmp/out/tuning.db  (flashtune query shows the winners)
tune 1: rc=0 in 296 s
"""


def synthetic_report():
    rows = []
    for dt in ("f16", "bf16"):
        for d in (64, 128):
            for c in (0, 1):
                for s in (512, 4096, 16384):
                    b, h = 16384 // s, 2048 // d
                    fl = flops(b, h, s, s, d, c)
                    row = {"dtype": dt, "d": d, "causal": c, "seqlen": s, "batch": b, "heads": h, "flops": fl,
                           "naive_scores_bytes": b * h * s * s * 4, "systems": {}}
                    for name, t in (("flashtune", 300 + d / 4 - 20 * c), ("fa2", 305 - 20 * c), ("cudnn", 450 + d),
                                    ("efficient", 200), ("flex", 380 + d / 8)):
                        ms = fl / t / 1e9
                        row["systems"][name] = {"ms": ms, "q1_ms": ms * 0.99, "q3_ms": ms * 1.01, "tflops": t,
                                                "reps": 25, "first_call_s": 0.004, "check": {"ok": True, "rel_l2": 1e-3}}
                    row["systems"]["flashtune"]["mem"] = {
                        "o_bytes": b * s * h * d * 2, "lse_bytes": b * h * s * 4, "peak_extra_bytes": b * s * h * d * 2,
                        "peak_extra_bytes_lse": b * s * h * d * 2 + b * h * s * 4, "driver_first_call_bytes": 2 << 20,
                        "driver_later_call_bytes": 0, "only_o_lse": True}
                    row["systems"]["flashtune"]["dispatch"] = "tuned for this bucket: d=%d,bm=128,bn=64" % d
                    row["systems"]["flashtune"]["bucket"] = bucket_key(dt, d, c, b, h, s, s)
                    rows.append(row)
    rows[1]["systems"]["efficient"] = {"error": "No available kernel. Aborting execution."}
    rows[2]["systems"]["flex"].update(wrong=True, check={"ok": False, "rel_l2": 0.7})
    rows[2]["systems"]["flex"].pop("tflops")
    rows[3]["systems"]["flashtune"]["tflops"] = 600  # flashtune ahead of cuDNN once
    return {"env": {"gpu": {"name": "Synthetic GPU"}, "driver": "0.0", "torch": "x", "torch_cuda": "13.0",
                    "cudnn": 91900, "triton": "3.6.0", "date": "2026-01-01 00:00:00 UTC"},
            "config": {"tokens": 16384, "hidden": 2048, "layout": "bhsd", "seed": 0, "flush_mib": 256, "rounds": 5,
                       "rep_ms": 200, "check_rows": 128, "forced": {}, "database_arg": "t.db",
                       "database_used": "t.db", "flex_mode": "max-autotune-no-cudagraphs"},
            "rows": rows, "skipped_shapes": [],
            "tuning_cost": {"log": dict(parse_tune_log(SAMPLE_TUNE_LOG), path="tune.txt"), "not_available": ["x"]},
            "overhead": {"dispatch_ns": {"median": 2100, "p99": 4000}, "cold_start_ms": 35.5, "note": "a|b"},
            "overhead_path": "overhead.json"}


def merge_reports(parts):
    """One report from the parts of a run split over several GPUs of one host (for example one dtype
    per GPU, started together): the rows in the order given, the environment and configuration of
    the first part, and each part's GPU, date and command under "parts". The parts must time the
    same systems and must not measure the same shape twice."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    systems = first.get("config", {}).get("systems")
    merged = dict(first)
    merged["rows"], merged["dispatch"], merged["skipped_shapes"], merged["parts"] = [], {}, [], []
    seen = set()
    for i, part in enumerate(parts):
        if part.get("config", {}).get("systems") != systems:
            raise ValueError("part %d times %s, part 1 times %s" % (i + 1, part.get("config", {}).get("systems"),
                                                                    systems))
        for row in part.get("rows", []):
            key = (row["dtype"], row["d"], row["causal"], row["seqlen"], row["batch"], row["heads"])
            if key in seen:
                raise ValueError("part %d measures %s d=%d causal=%d seqlen=%d again" % (i + 1, row["dtype"],
                                 row["d"], row["causal"], row["seqlen"]))
            seen.add(key)
            merged["rows"].append(row)
        merged["dispatch"].update(part.get("dispatch", {}))
        merged["skipped_shapes"].extend(part.get("skipped_shapes", []))
        env = part.get("env", {})
        merged["parts"].append({"gpu": env.get("gpu"), "date": env.get("date"),
                                "command": part.get("config", {}).get("command")})
    return merged


def make_db(path):
    """A small database in flashtune's schema (tuning_db/db.c, version 1)."""
    con = sqlite3.connect(path)
    strict = "STRICT" if sqlite3.sqlite_version_info >= (3, 37, 0) else ""
    con.executescript("""
        PRAGMA application_id = 1179927618; PRAGMA user_version = 1;
        CREATE TABLE meta (key TEXT PRIMARY KEY, value ANY) %(s)s;
        CREATE TABLE devices (id INTEGER PRIMARY KEY, name TEXT NOT NULL, cc INTEGER NOT NULL, sms INTEGER NOT NULL,
          smem_per_block INTEGER NOT NULL, smem_per_sm INTEGER NOT NULL, l2_bytes INTEGER NOT NULL,
          driver_version INTEGER NOT NULL, nvrtc_version TEXT NOT NULL,
          first_seen TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) %(s)s;
        CREATE TABLE kernels (id INTEGER PRIMARY KEY, family TEXT NOT NULL, variant TEXT NOT NULL, arch TEXT NOT NULL,
          template_hash TEXT NOT NULL, source_hash TEXT NOT NULL, entry TEXT NOT NULL, source TEXT, cubin BLOB,
          registers INTEGER NOT NULL, spill_stores INTEGER NOT NULL, spill_loads INTEGER NOT NULL,
          smem_static INTEGER NOT NULL, smem_dynamic INTEGER NOT NULL, threads INTEGER NOT NULL, compile_ms REAL,
          created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) %(s)s;
        CREATE TABLE results (id INTEGER PRIMARY KEY, device_id INTEGER NOT NULL, kernel_id INTEGER NOT NULL,
          dtype TEXT NOT NULL, head_dim INTEGER NOT NULL, causal INTEGER NOT NULL, seqlen_bucket INTEGER NOT NULL,
          bh_bucket INTEGER NOT NULL, batch INTEGER NOT NULL, heads_q INTEGER NOT NULL, heads_kv INTEGER NOT NULL,
          seqlen_q INTEGER NOT NULL, seqlen_k INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
          median_ms REAL, iqr_ms REAL, tflops REAL, max_error REAL, repetitions INTEGER NOT NULL DEFAULT 0,
          driver_version INTEGER NOT NULL, nvrtc_version TEXT NOT NULL, template_hash TEXT NOT NULL,
          measured_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) %(s)s;
        INSERT INTO meta VALUES ('created_by', 'flashtune 0.1.0');
        INSERT INTO devices (id, name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, driver_version, nvrtc_version)
          VALUES (1, 'NVIDIA H200', 90, 132, 232448, 233472, 62914560, 13000, '13.0');
        INSERT INTO kernels (id, family, variant, arch, template_hash, source_hash, entry, cubin, registers,
          spill_stores, spill_loads, smem_static, smem_dynamic, threads, compile_ms, created_at) VALUES
          (1, 'flash_fwd_sm80', 'd=128,bm=128,bn=64', 'sm_90', 't', 'a', 'e', x'00', 255, 40, 40, 0, 1, 128, 1500,
           '2026-11-30 10:00:00'),
          (2, 'flash_fwd_sm80', 'd=128,bm=64,bn=64', 'sm_90', 't', 'b', 'e', NULL, 200, 0, 0, 0, 1, 128, 900,
           '2026-11-30 10:00:01');
        INSERT INTO results (device_id, kernel_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket, batch, heads_q,
          heads_kv, seqlen_q, seqlen_k, status, median_ms, tflops, repetitions, driver_version, nvrtc_version,
          template_hash, measured_at) VALUES
          (1, 1, 'f16', 128, 0, 4096, 64, 4, 16, 16, 4096, 4096, 'ok', 2.0, 300, 40, 13000, '13.0', 't',
           '2026-11-30 10:01:00'),
          (1, 2, 'f16', 128, 0, 4096, 64, 4, 16, 16, 4096, 4096, 'ok', 2.5, 240, 30, 13000, '13.0', 't',
           '2026-11-30 10:05:54'),
          (1, 2, 'f16', 128, 1, 4096, 64, 4, 16, 16, 4096, 4096, 'wrong_result', NULL, NULL, 0, 13000, '13.0', 't',
           '2026-11-30 10:03:00');
    """ % {"s": strict})
    con.commit()
    con.close()


def selftest():
    failures, passed = [], []

    def expect(cond, what):
        print("%s %s" % ("ok  " if cond else "FAIL", what))
        (passed if cond else failures).append(what)

    expect(flops(4, 16, 4096, 4096, 128, 0) == 4.0 * 4 * 16 * 4096 * 4096 * 128, "flops, non-causal")
    expect(flops(4, 16, 4096, 4096, 128, 1) == 2.0 * 4 * 16 * 4096 * 4096 * 128, "flops, causal halves")
    expect(abs(flops(1, 16, 16384, 16384, 128, 0) / 7.0 / 1e9 - 314.1) < 0.1, "TFLOP/s of a 7 ms s=16k d=128 call")
    expect(abs(geomean([1, 4, 16]) - 4) < 1e-12, "geometric mean")
    expect(geomean([]) is None and geomean([None, 0, float("nan")]) is None, "geometric mean of nothing")
    st = summarize([5, 1, 4, 2, 3])
    expect((st["ms"], st["q1_ms"], st["q3_ms"], st["reps"]) == (3, 2, 4, 5), "median and quartiles")
    expect(summarize([1, 2, 3, 4])["ms"] == 2.5, "median of an even count")
    expect(bucket_key("f16", 64, 1, 32, 32, 512, 512) == "f16 d=64 causal=1 seqlen<=512 b*h<=1024", "bucket key")
    expect(bucket_key("bf16", 128, 0, 1, 16, 3000, 3000) == "bf16 d=128 causal=0 seqlen<=4096 b*h<=16", "bucket rounding")
    disp = parse_dispatch("noise\nflashtune: f16 d=64 causal=1 seqlen<=512 b*h<=16: tuned for the nearest bucket "
                          "(seqlen <= 512, b*h <= 1024): d=64,bm=128\n")
    expect(disp == {"f16 d=64 causal=1 seqlen<=512 b*h<=16":
                    "tuned for the nearest bucket (seqlen <= 512, b*h <= 1024): d=64,bm=128"}, "dispatch line")
    expect([parse_duration(x) for x in ("12.3s", "4m54s", "1h02m", "x")] == [12.3, 294.0, 3720.0, None], "durations")
    log = parse_tune_log(SAMPLE_TUNE_LOG)
    expect(log.get("buckets") == 96 and log.get("variants") == 1560 and log.get("pruned") == 1896, "tune log: counts")
    expect(log.get("wall_s") == 294 and log.get("compile_s") == 1.2 and log.get("verify_s") == 20.3 and
           log.get("timing_s") == 240 and abs(log.get("other_s") - 32.5) < 1e-9, "tune log: time split")
    expect(log.get("by_status", {}).get("wrong result") == 12 and log["by_status"].get("ok") == 5900, "tune log: status")
    expect(log.get("near_ties") == 17 and log.get("script_wall_s") == 296, "tune log: near ties, script clock")
    two = parse_tune_log(SAMPLE_TUNE_LOG + SAMPLE_TUNE_LOG.replace("4m54s", "1m06s"))
    expect(two.get("tunes") == 2 and two.get("measured") == 11840 and two.get("wall_s") == 360 and
           two["by_status"].get("ok") == 11800 and two.get("buckets") == 192, "tune log of two tunes: their sums")
    with tempfile.TemporaryDirectory() as tmp:
        dbp = os.path.join(tmp, "t.db")
        make_db(dbp)
        cost = db_cost(dbp)
        dev = cost["devices"][0]
        expect(cost["kernels"]["rows"] == 2 and cost["kernels"]["compile_ms_sum"] == 2400 and
               cost["kernels"]["with_cubin"] == 1, "database: kernels and NVRTC time")
        expect(dev["results"] == 3 and dev["by_status"] == {"ok": 2, "wrong_result": 1} and dev["buckets"] == 2,
               "database: results by status and buckets")
        expect(dev["timed_gpu_ms"] == 2.0 * 40 + 2.5 * 30 and dev["measured_span_s"] == 294, "database: GPU time, span")
        expect(len(dev["winners"]) == 1 and dev["winners"][0]["variant"] == "d=128,bm=128,bn=64", "database: winner")
        tc = tuning_cost(os.path.join(tmp, "missing.txt"), dbp)
        expect("log_error" in tc and "db" in tc, "tuning cost with a missing log")
        tc = tuning_cost(None, os.path.join(tmp, "nope.db"))
        expect("db_error" in tc and any("no --tune-log" in x for x in tc["not_available"]), "tuning cost, nothing there")
        rep = synthetic_report()
        rep["tuning_cost"]["db"] = cost
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
        expect("only O/LSE" in md and "| 64.0 MiB |" in md, "memory table")
        out = os.path.join(tmp, "out")
        write_outputs(rep, out, plots=True)
        back = json.load(open(os.path.join(out, "report.json")))
        expect(len(back["rows"]) == len(rep["rows"]) and os.path.exists(os.path.join(out, "report.md")),
               "report.json and report.md written")
        try:
            import matplotlib  # noqa: F401
            have_mpl = True
        except ImportError:
            have_mpl = False
        if have_mpl:
            pngs = sorted(f for f in os.listdir(out) if f.endswith(".png"))
            expect(pngs == ["tflops_bf16.png", "tflops_f16.png"], "plots: one figure per dtype")
            expect(all(open(os.path.join(out, p), "rb").read(8) == b"\x89PNG\r\n\x1a\n" for p in pngs), "plots are PNG")
        else:
            print("skip plots: no matplotlib")
            expect(back.get("plots") == "matplotlib missing: no plots", "no plots without matplotlib, said so")
        a, b = synthetic_report(), synthetic_report()
        a["rows"] = [r for r in a["rows"] if r["dtype"] == "f16"]
        b["rows"] = [r for r in b["rows"] if r["dtype"] == "bf16"]
        a["config"]["systems"] = b["config"]["systems"] = ["flashtune", "fa2"]
        b["env"]["gpu"] = {"name": "Synthetic GPU", "index": 1}
        m = merge_reports([a, b])
        expect(len(m["rows"]) == 24 and [r["dtype"] for r in m["rows"]][11:13] == ["f16", "bf16"] and
               len(m["parts"]) == 2 and m["parts"][1]["gpu"]["index"] == 1, "merge: rows in order, parts kept")
        expect("One run split over 2 GPUs of one host" in render_markdown(m), "merge: the parts named in the text")
        sums = templates_sha256()
        expect(len(sums.get("flash_fwd_sm90.cuh", "")) == 64 and len(sums.get("flash_fwd_sm80.cuh", "")) == 64,
               "the templates' sha256 for the environment")
        for bad, what in (([a, a], "measures f16 d=64 causal=0 seqlen=512 again"),
                          ([a, dict(b, config={"systems": ["fa2"]})], "part 2 times")):
            try:
                merge_reports(bad)
                expect(False, "merge refuses: " + what)
            except ValueError as e:
                expect(what in str(e), "merge refuses: " + what)
        if os.environ.get("REPORT_SELFTEST_KEEP"):
            keep = os.environ["REPORT_SELFTEST_KEEP"]
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(out, keep)
    print("%d passed, %d failed" % (len(passed), len(failures)))
    return 1 if failures else 0


# ---- command line ------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("what to measure")
    g.add_argument("--out", help="output directory (report.json, report.md, tflops_<dtype>.png)")
    g.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    g.add_argument("--head-dims", default="64,128,256")
    g.add_argument("--causal", default="0,1", help="0, 1 or 0,1")
    g.add_argument("--dtypes", default="f16,bf16", help="f16, bf16 or both")
    g.add_argument("--tokens", type=int, default=16384, help="tokens per batch: batch = tokens / seqlen")
    g.add_argument("--hidden", type=int, default=2048, help="heads = hidden / head_dim")
    g.add_argument("--layout", choices=("bhsd", "bshd"), default="bhsd",
                   help="storage of Q, K, V (and what SDPA gets); the other systems read it through strides")
    g.add_argument("--systems", default=DEFAULT_SYSTEMS, help="from flashtune, fa2, cudnn, efficient, flex")
    g.add_argument("--variant", action="append", metavar="V",
                   help="also time a flashtune context forced to this variant (d, causal, dtype may be left out; "
                        "repeatable)")
    g.add_argument("--flex", action="store_true", help="also time FlexAttention (compiles per shape: slow)")
    g.add_argument("--flex-mode", default="max-autotune-no-cudagraphs", help="torch.compile mode for flex_attention")
    g.add_argument("--flex-budget", type=float, default=300, help="seconds of flex first calls before flex is "
                   "skipped for the remaining shapes (0: no limit)")
    g.add_argument("--spec", help="spec file for the flashtune contexts (default: the built-in forward spec)")
    g.add_argument("--device", type=int, default=0)
    g.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("flashtune and the tuning cost")
    g.add_argument("--db", help="tuning database: the flashtune context dispatches to its winners, and the tuning "
                   "cost it records is reported (default for the context: $FLASHTUNE_DB, else "
                   "~/.local/share/flashtune/tuning.db when it exists, else the built-in defaults)")
    g.add_argument("--no-db", action="store_true", help="the context uses the built-in defaults (--db still "
                   "reported)")
    g.add_argument("--tune-log", help="what `flashtune tune` printed (its time split)")
    g.add_argument("--flashtune", default=None, help="the flashtune command, to read --db through `flashtune query` "
                   "when Python's SQLite cannot (default: build-dev/flashtune or build/flashtune)")
    g.add_argument("--overhead-json", help="JSON from bench/overhead.c, included verbatim")
    g = ap.add_argument_group("timing and checking")
    g.add_argument("--rounds", type=int, default=5, help="interleaved rounds per shape")
    g.add_argument("--rep-ms", type=float, default=300, help="timed milliseconds per system and shape, all rounds")
    g.add_argument("--min-reps", type=int, default=3, help="repetitions per round, at least")
    g.add_argument("--max-reps", type=int, default=100, help="repetitions per round, at most")
    g.add_argument("--warmup-ms", type=float, default=25)
    g.add_argument("--flush-mib", type=int, default=256, help="buffer zeroed before each repetition")
    g.add_argument("--check-rows", type=int, default=128, help="rows per sampled (batch, head) checked in fp64")
    g.add_argument("--tol-scale", type=float, default=1.0, help="multiplies the error tolerances")
    g.add_argument("--time-wrong", action="store_true", help="time systems whose output failed the check too")
    g.add_argument("--budget", type=float, default=0, help="stop starting new shapes after this many seconds (0: none)")
    g = ap.add_argument_group("other modes")
    g.add_argument("--no-plots", action="store_true")
    g.add_argument("--from-json", metavar="REPORT", action="append",
                   help="re-render report.md and the plots of a report.json (with --tune-log/--db/--overhead-json: "
                   "add those) into --out; no GPU. Repeated: one report from the parts of a run split over the "
                   "GPUs of one host (the same systems, each shape once)")
    g.add_argument("--selftest", action="store_true", help="check the parts that need no GPU and no torch")
    args = ap.parse_args(argv)

    if args.flashtune is None:
        for cand in ("build-dev/flashtune", "build/flashtune"):
            if os.path.exists(os.path.join(REPO, cand)):
                args.flashtune = os.path.join(REPO, cand)
                break
    if args.selftest:
        return selftest()
    if not args.out:
        ap.error("--out is required")
    if args.from_json:
        parts = []
        for path in args.from_json:
            with open(path) as f:
                parts.append(json.load(f))
        try:
            report = merge_reports(parts)
        except ValueError as e:
            sys.exit("report.py: cannot merge %s: %s" % (", ".join(args.from_json), e))
        if args.tune_log or args.db:
            old = report.get("tuning_cost") or {}
            report["tuning_cost"] = tuning_cost(args.tune_log, args.db, args.flashtune)
            if not args.db and "db" in old:  # keep what the run read from its database
                report["tuning_cost"]["db"] = old["db"]
        if args.overhead_json:
            with open(args.overhead_json) as f:
                report["overhead"] = json.load(f)
            report["overhead_path"] = args.overhead_json
        report.pop("plots", None)
        write_outputs(report, args.out, plots=not args.no_plots)
        print("wrote %s" % ", ".join(os.path.join(args.out, f) for f in sorted(os.listdir(args.out))))
        return 0
    for dt in args.dtypes.split(","):
        if dt not in TOLERANCE:
            ap.error("--dtypes takes f16 and/or bf16, not %r" % dt)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
