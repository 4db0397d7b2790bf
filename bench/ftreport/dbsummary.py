"""The tuning cost a tuning database records (kernels and their NVRTC time, per device its
results by status, buckets, GPU time inside the timed repetitions, the span of the measurements,
per group and per bucket, and the runtime's misses), read with Python's sqlite3 or, when that
cannot read the file, through `flashtune query --all --json`; and the cost of a tune from its log
and its database together.

The database is read only through its views v_results and v_misses (v_misses from schema 2 on)
and the columns of the kernels, devices and meta tables that schema 3 keeps, never through the
results and misses tables themselves: schema 2 keeps a bucket as the columns dtype, head_dim,
causal, seqlen_bucket and bh_bucket, schema 3 as an operation `op` and a JSON key `key`, and the
views of both expose the five columns (those of schema 3 op and key as well). Where the report
needs an operation it takes op from the view, else 'fwd'; entries of an operation other than
'fwd' name it as "op" (so that those of schema 2 are as they were)."""
import datetime
import json
import os
import sqlite3
import subprocess

from .parse import parse_tune_log

# A bucket's columns in the views (schema 2's bucket; schema 3's views derive them from the key).
BUCKET_COLUMNS = ("dtype", "head_dim", "causal", "seqlen_bucket", "bh_bucket")


def _span_s(first, last):
    try:
        a = datetime.datetime.strptime(first, "%Y-%m-%d %H:%M:%S")
        b = datetime.datetime.strptime(last, "%Y-%m-%d %H:%M:%S")
        return (b - a).total_seconds()
    except (TypeError, ValueError):
        return None


def view_columns(con, view):
    """The names of a view's columns (none when there is no such view)."""
    return [row[1] for row in con.execute("PRAGMA table_info(%s)" % view)]


def op_and_bucket(columns):
    """Two SQL expressions over a view with these columns: the operation (the column op, or 'fwd'
    where there is none, as in schema 2) and a text that names a bucket (the operation with the key
    where there is one, else with the bucket's columns)."""
    op = "op" if "op" in columns else "'fwd'"
    return op, " || '/' || ".join([op] + (["key"] if "key" in columns else list(BUCKET_COLUMNS)))


def with_op(op, entry):
    """entry with the operation put first, unless that is 'fwd' (what every entry of schema 2 is)."""
    return entry if op == "fwd" else dict({"op": op}, **entry)


def shape_text(batch, heads_q, seqlen_q):
    """The shape a winner was measured on, as 'b=4,hq=16,sq=4096' (None when the view has none)."""
    if None in (batch, heads_q, seqlen_q):
        return None
    return "b=%d,hq=%d,sq=%d" % (batch, heads_q, seqlen_q)


def db_cost(path):
    """The tuning cost a database file records, read with sqlite3 (db_summary). Raises
    sqlite3.Error when the file cannot be read."""
    if not os.path.exists(path):
        raise sqlite3.OperationalError("no such file: %s" % path)
    uri = "file:%s?mode=ro" % os.path.abspath(path)
    try:
        con = sqlite3.connect(uri, uri=True)
        con.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.Error:  # a read-only directory cannot hold the WAL's -shm: read it as immutable
        con = sqlite3.connect("file:%s?immutable=1" % os.path.abspath(path), uri=True)
    try:
        return db_summary(con, path)
    finally:
        con.close()


def db_summary(con, path):
    """The tuning cost recorded in the database of connection con (path: what the summary names
    it), through the views (module docstring). A bucket's winner here is its fastest ok result
    (the older one on a tie) whatever versions it was measured under; v_winners leaves stale
    results out."""
    out = {"source": "sqlite3", "path": path}
    out["application_id"] = con.execute("PRAGMA application_id").fetchone()[0]
    out["schema_version"] = con.execute("PRAGMA user_version").fetchone()[0]
    out["meta"] = {k: v for k, v in con.execute("SELECT key, value FROM meta")}
    k = con.execute("SELECT count(*), count(cubin), count(compile_ms), sum(compile_ms), max(compile_ms), "
                    "min(created_at), max(created_at) FROM kernels").fetchone()
    out["kernels"] = {"rows": k[0], "with_cubin": k[1], "with_compile_ms": k[2],
                      "compile_ms_sum": k[3], "compile_ms_max": k[4],
                      "first_created": k[5], "last_created": k[6], "created_span_s": _span_s(k[5], k[6])}
    op, bucket = op_and_bucket(view_columns(con, "v_results"))
    devices = []
    for (dev_id, name, cc, sms, driver, nvrtc) in con.execute(
            "SELECT id, name, cc, sms, driver_version, nvrtc_version FROM devices ORDER BY id").fetchall():
        d = {"id": dev_id, "name": name, "cc": cc, "sms": sms, "driver_version": driver,
             "nvrtc_version": nvrtc}
        d["by_status"] = {s: n for s, n in con.execute(
            "SELECT status, count(*) FROM v_results WHERE device_id = ? GROUP BY status ORDER BY status", (dev_id,))}
        r = con.execute("SELECT count(*), sum(median_ms * repetitions), sum(repetitions), min(measured_at), "
                        "max(measured_at), count(DISTINCT %s) FROM v_results WHERE device_id = ?" % bucket,
                        (dev_id,)).fetchone()
        d.update(results=r[0], timed_gpu_ms=r[1], repetitions=r[2], first_measured=r[3], last_measured=r[4],
                 measured_span_s=_span_s(r[3], r[4]), buckets=r[5])
        c = con.execute("SELECT sum(k.compile_ms), count(DISTINCT k.id) FROM kernels k WHERE k.id IN "
                        "(SELECT kernel_id FROM v_results WHERE device_id = ?)", (dev_id,)).fetchone()
        d["compile_ms_sum_of_its_kernels"], d["kernels"] = c[0], c[1]
        d["groups"] = [
            with_op(g[0], {"dtype": g[1], "d": g[2], "causal": g[3], "buckets": g[4], "results": g[5], "ok": g[6],
                           "timed_gpu_ms": g[7]})
            for g in con.execute(
                "SELECT %s AS op_, dtype, head_dim, causal, count(DISTINCT %s), count(*), sum(status = 'ok'), "
                "sum(median_ms * repetitions) FROM v_results WHERE device_id = ? GROUP BY op_, dtype, head_dim, "
                "causal ORDER BY op_, dtype, head_dim, causal" % (op, bucket), (dev_id,))]
        # Each bucket's ok results, the fastest (then the oldest) first: its first row is its winner.
        d["winners"], seen = [], set()
        for w in con.execute(
                "SELECT %s AS op_, %s AS bucket_, dtype, head_dim, causal, seqlen_bucket, bh_bucket, variant, "
                "median_ms, tflops, batch, heads_q, seqlen_q FROM v_results WHERE device_id = ? AND status = 'ok' "
                "AND median_ms IS NOT NULL ORDER BY op_, dtype, head_dim, causal, seqlen_bucket, bh_bucket, "
                "bucket_, median_ms, result_id" % (op, bucket), (dev_id,)):
            if w[1] in seen:
                continue
            seen.add(w[1])
            d["winners"].append(with_op(w[0], {
                "dtype": w[2], "d": w[3], "causal": w[4], "seqlen_bucket": w[5], "bh_bucket": w[6],
                "variant": w[7], "median_ms": w[8], "tflops": w[9], "shape": shape_text(w[10], w[11], w[12])}))
        devices.append(d)
    out["devices"] = devices
    views = {t for (t,) in con.execute("SELECT name FROM sqlite_schema WHERE type = 'view'")}
    if "v_misses" in views:  # schema 2 on: buckets the runtime found no tuned winner for
        miss_op, _ = op_and_bucket(view_columns(con, "v_misses"))
        out["misses"] = [with_op(m[0], {"dtype": m[1], "d": m[2], "causal": m[3], "seqlen_bucket": m[4],
                                        "bh_bucket": m[5], "fallback": m[6], "count": m[7]})
                         for m in con.execute(
                             "SELECT %s AS op_, dtype, head_dim, causal, seqlen_bucket, bh_bucket, fallback, count "
                             "FROM v_misses ORDER BY op_, dtype, head_dim, causal, seqlen_bucket" % miss_op)]
    return out


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
