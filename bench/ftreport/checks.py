"""The self-tests of the parsers (parse.py) and of the database summary (dbsummary.py), apart from
them because they use the sample data of testdata.py, which is made with those modules."""
import os
import sqlite3

from .dbsummary import db_cost, db_summary, tuning_cost
from .parse import bucket_key, parse_dispatch, parse_duration, parse_tune_log, read_overhead
from .testdata import SAMPLE_TUNE_LOG, json_functions, make_db, make_db_file, watch_reads

def selftest_parse(expect, tmp):

    expect(bucket_key("f16", 64, 1, 32, 32, 512, 512) ==
           'fwd {"dtype":"f16","d":64,"causal":1,"group":1,"sq":512,"seqlen":512,"bh":1024}', "bucket key")
    expect(bucket_key("bf16", 128, 0, 1, 16, 3000, 3000) ==
           'fwd {"dtype":"bf16","d":128,"causal":0,"group":1,"sq":4096,"seqlen":4096,"bh":16}', "bucket rounding")
    expect(bucket_key("bf16", 128, 0, 64, 32, 1, 8192, heads_kv=4) ==
           'fwd {"dtype":"bf16","d":128,"causal":0,"group":8,"sq":1,"seqlen":8192,"bh":2048}', "decode bucket key")
    disp = parse_dispatch('noise\nflashtune: fwd {"dtype":"f16","d":64,"causal":1,"group":1,"sq":512,"seqlen":512,'
                          '"bh":16}: tuned for the nearest bucket (group <= 1, sq <= 512, seqlen <= 512, b*h <= 1024): '
                          'd=64,bm=128\n')
    expect(disp == {'fwd {"dtype":"f16","d":64,"causal":1,"group":1,"sq":512,"seqlen":512,"bh":16}':
                    "tuned for the nearest bucket (group <= 1, sq <= 512, seqlen <= 512, b*h <= 1024): d=64,bm=128"},
           "dispatch line")
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
    path = os.path.join(tmp, "overhead.json")
    with open(path, "w") as f:
        f.write('{"dispatch_ns": {"median": 2100}, "note": "a|b"}')
    expect(read_overhead(path) == {"dispatch_ns": {"median": 2100}, "note": "a|b"}, "overhead JSON read verbatim")
    with open(path, "w") as f:
        f.write("not json")
    for bad in (path, os.path.join(tmp, "missing.json")):
        try:
            read_overhead(bad)
            expect(False, "overhead JSON: an unreadable file raises")
        except (OSError, ValueError):
            expect(True, "overhead JSON: %s raises" % ("a missing file" if "missing" in bad else "text that is not JSON"))

def selftest_dbsummary(expect, tmp):

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
