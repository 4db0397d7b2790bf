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


def selftest(expect, tmp):
    from .testdata import json_functions, make_db, make_db_file, watch_reads

    dbp = os.path.join(tmp, "t.db")
    make_db_file(dbp)
    cost = db_cost(dbp)
    dev = cost["devices"][0]
    expect(cost["kernels"]["rows"] == 2 and cost["kernels"]["compile_ms_sum"] == 2400 and
           cost["kernels"]["with_cubin"] == 1, "database: kernels and NVRTC time")
    expect(dev["results"] == 3 and dev["by_status"] == {"ok": 2, "wrong_result": 1} and dev["buckets"] == 2,
           "database: results by status and buckets")
    expect(dev["timed_gpu_ms"] == 2.0 * 40 + 2.5 * 30 and dev["measured_span_s"] == 294, "database: GPU time, span")
    expect(len(dev["winners"]) == 1 and dev["winners"][0]["variant"] == "d=128,bm=128,bn=64", "database: winner")
    expect(dev["winners"][0] == {"dtype": "f16", "d": 128, "causal": 0, "seqlen_bucket": 4096, "bh_bucket": 64,
                                 "variant": "d=128,bm=128,bn=64", "median_ms": 2.0, "tflops": 300,
                                 "shape": "b=4,hq=16,sq=4096"}, "database: the winner's fields")
    expect(dev["groups"] == [
        {"dtype": "f16", "d": 128, "causal": 0, "buckets": 1, "results": 2, "ok": 2, "timed_gpu_ms": 155.0},
        {"dtype": "f16", "d": 128, "causal": 1, "buckets": 1, "results": 1, "ok": 0, "timed_gpu_ms": None}],
        "database: groups")
    expect(dev["kernels"] == 2 and dev["compile_ms_sum_of_its_kernels"] == 2400, "database: a device's kernels")
    expect(cost["misses"] == [
        {"dtype": "bf16", "d": 64, "causal": 0, "seqlen_bucket": 512, "bh_bucket": 16, "fallback": "default",
         "count": 1},
        {"dtype": "f16", "d": 128, "causal": 1, "seqlen_bucket": 4096, "bh_bucket": 64, "fallback": "nearest",
         "count": 2}], "database: misses")
    expect(cost["schema_version"] == 2 and cost["meta"] == {"created_by": "flashtune 0.1.0"}, "database: version, meta")
    tc = tuning_cost(os.path.join(tmp, "missing.txt"), dbp)
    expect("log_error" in tc and "db" in tc, "tuning cost with a missing log")
    tc = tuning_cost(None, os.path.join(tmp, "nope.db"))
    expect("db_error" in tc and any("no --tune-log" in x for x in tc["not_available"]), "tuning cost, nothing there")

    def through_views(reads, what):
        direct = {(t, c) for t, c, inner in reads if inner is None}
        tables = {t for t, _ in direct}
        expect(tables <= {"v_results", "v_misses", "kernels", "devices", "meta", "sqlite_master"} and
               {c for t, c in direct if t == "kernels"} <= {"", "id", "cubin", "compile_ms", "created_at"},
               "%s: results and misses read only through the views" % what)

    con = make_db(sqlite3.connect(":memory:"))
    reads = watch_reads(con)
    two = db_summary(con, ":memory:")
    expect(two == dict(cost, path=":memory:"), "schema 2 in memory: the summary of the file")
    through_views(reads, "schema 2")
    if not json_functions():
        print("skip schema 3: this SQLite has no json_extract")
        return
    con = make_db(sqlite3.connect(":memory:"), schema=3)
    reads = watch_reads(con)
    three = db_summary(con, ":memory:")
    expect(three["schema_version"] == 3 and dict(three, schema_version=2) == two,
           "schema 3 (op and key): the same summary as schema 2")
    through_views(reads, "schema 3")
    other = db_summary(make_db(sqlite3.connect(":memory:"), schema=3, other_op=True), ":memory:")
    dev = other["devices"][0]
    expect(dev["results"] == 5 and dev["buckets"] == 3 and dev["by_status"] == {"ok": 4, "wrong_result": 1} and
           dev["timed_gpu_ms"] == 155.0 + 160.0, "schema 3, two operations: a bucket per operation and key")
    expect([(g.get("op"), g["causal"], g["buckets"], g["results"]) for g in dev["groups"]] ==
           [("bwd", 0, 1, 2), (None, 0, 1, 2), (None, 1, 1, 1)], "schema 3, two operations: groups")
    expect([(w.get("op"), w["variant"], w["median_ms"]) for w in dev["winners"]] ==
           [("bwd", "d=128,bm=64,bn=64", 5.0), (None, "d=128,bm=128,bn=64", 2.0)],
           "schema 3, two operations: a winner per operation")
    expect([(m.get("op"), m["dtype"], m["fallback"]) for m in other["misses"]] ==
           [("bwd", "f16", "default"), (None, "bf16", "default"), (None, "f16", "nearest")],
           "schema 3, two operations: misses")
