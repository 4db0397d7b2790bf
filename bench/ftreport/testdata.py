"""What the self-tests run on: a tune log as `flashtune tune` prints it, a synthetic report (two
dtypes, two head dims, both causalities, three seqlens, five systems, with an error, a wrong output
and a shape where flashtune leads cuDNN), and small tuning databases with the tables and views the
report reads, in schema 2's form (the bucket as columns) or schema 3's (an operation and a JSON
key, the views exposing the bucket's columns from the key)."""
import importlib
import json
import os
import sqlite3

from flashtune import flops

from .parse import bucket_key, parse_tune_log

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


def report_with_db(tmp):
    """synthetic_report() with the tuning cost of the schema-2 database tmp/t.db (made if absent)."""
    from .dbsummary import db_cost

    path = os.path.join(tmp, "t.db")
    if not os.path.exists(path):
        make_db_file(path)
    rep = synthetic_report()
    rep["tuning_cost"]["db"] = db_cost(path)
    return rep


# (device_id, kernel_id, (dtype, head_dim, causal, seqlen_bucket, bh_bucket), batch, heads_q, heads_kv,
#  seqlen_q, seqlen_k, status, median_ms, tflops, repetitions, measured_at)
RESULTS = [
    (1, 1, ("f16", 128, 0, 4096, 64), 4, 16, 16, 4096, 4096, "ok", 2.0, 300, 40, "2026-11-30 10:01:00"),
    (1, 2, ("f16", 128, 0, 4096, 64), 4, 16, 16, 4096, 4096, "ok", 2.5, 240, 30, "2026-11-30 10:05:54"),
    (1, 2, ("f16", 128, 1, 4096, 64), 4, 16, 16, 4096, 4096, "wrong_result", None, None, 0, "2026-11-30 10:03:00"),
]
# (device_id, (dtype, head_dim, causal, seqlen_bucket, bh_bucket), batch, heads_q, heads_kv, seqlen_q, seqlen_k,
#  fallback, count)
MISSES = [
    (1, ("f16", 128, 1, 4096, 64), 4, 16, 16, 4000, 4000, "nearest", 2),
    (1, ("bf16", 64, 0, 512, 16), 1, 16, 16, 500, 500, "default", 1),
]
# Schema 3's other operations: results and a miss of a backward pass in the forward's buckets.
OTHER_OP_RESULTS = [
    (1, 2, ("f16", 128, 0, 4096, 64), 4, 16, 16, 4096, 4096, "ok", 5.0, 240, 20, "2026-11-30 10:06:00"),
    (1, 1, ("f16", 128, 0, 4096, 64), 4, 16, 16, 4096, 4096, "ok", 6.0, 200, 10, "2026-11-30 10:07:00"),
]
OTHER_OP_MISSES = [(1, ("f16", 128, 0, 4096, 64), 4, 16, 16, 4096, 4096, "default", 1)]

_TABLES = """
    PRAGMA application_id = 1179927618; PRAGMA user_version = %(version)d;
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
      %(bucket)s, batch INTEGER NOT NULL, heads_q INTEGER NOT NULL, heads_kv INTEGER NOT NULL,
      seqlen_q INTEGER NOT NULL, seqlen_k INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
      median_ms REAL, iqr_ms REAL, tflops REAL, max_error REAL, repetitions INTEGER NOT NULL DEFAULT 0,
      driver_version INTEGER NOT NULL, nvrtc_version TEXT NOT NULL, template_hash TEXT NOT NULL,
      measured_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) %(s)s;
    CREATE TABLE misses (id INTEGER PRIMARY KEY, device_id INTEGER NOT NULL, %(bucket)s,
      batch INTEGER NOT NULL, heads_q INTEGER NOT NULL, heads_kv INTEGER NOT NULL, seqlen_q INTEGER NOT NULL,
      seqlen_k INTEGER NOT NULL, fallback TEXT NOT NULL, count INTEGER NOT NULL DEFAULT 1,
      first_seen TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, last_seen TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) %(s)s;
    CREATE VIEW v_results AS
    SELECT r.id AS result_id, r.device_id, r.kernel_id, d.name AS device, d.cc, d.sms, k.family, k.variant,
           k.arch, %(columns)s, r.batch, r.heads_q, r.heads_kv, r.seqlen_q, r.seqlen_k, r.status, r.reason,
           r.median_ms, r.iqr_ms, r.tflops, r.max_error, r.repetitions, r.measured_at, r.driver_version,
           r.nvrtc_version, r.template_hash, 0 AS stale
    FROM results r JOIN devices d ON d.id = r.device_id JOIN kernels k ON k.id = r.kernel_id;
    CREATE VIEW v_misses AS
    SELECT m.id AS miss_id, m.device_id, d.name AS device, %(miss_columns)s, m.batch, m.heads_q, m.heads_kv,
           m.seqlen_q, m.seqlen_k, m.fallback, m.count, m.first_seen, m.last_seen, 0 AS tuned
    FROM misses m JOIN devices d ON d.id = m.device_id;
    INSERT INTO meta VALUES ('created_by', 'flashtune 0.1.0');
    INSERT INTO devices (id, name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, driver_version, nvrtc_version)
      VALUES (1, 'NVIDIA H200', 90, 132, 232448, 233472, 62914560, 13000, '13.0');
    INSERT INTO kernels (id, family, variant, arch, template_hash, source_hash, entry, cubin, registers,
      spill_stores, spill_loads, smem_static, smem_dynamic, threads, compile_ms, created_at) VALUES
      (1, 'flash_fwd_sm80', 'd=128,bm=128,bn=64', 'sm_90', 't', 'a', 'e', x'00', 255, 40, 40, 0, 1, 128, 1500,
       '2026-11-30 10:00:00'),
      (2, 'flash_fwd_sm80', 'd=128,bm=64,bn=64', 'sm_90', 't', 'b', 'e', NULL, 200, 0, 0, 0, 1, 128, 900,
       '2026-11-30 10:00:01');
"""
_BUCKET_2 = ("dtype TEXT NOT NULL, head_dim INTEGER NOT NULL, causal INTEGER NOT NULL, "
             "seqlen_bucket INTEGER NOT NULL, bh_bucket INTEGER NOT NULL")
_COLUMNS_2 = "%(t)s.dtype, %(t)s.head_dim, %(t)s.causal, %(t)s.seqlen_bucket, %(t)s.bh_bucket"
_COLUMNS_3 = ("%(t)s.op, %(t)s.key, json_extract(%(t)s.key, '$.dtype') AS dtype, "
              "json_extract(%(t)s.key, '$.d') AS head_dim, json_extract(%(t)s.key, '$.causal') AS causal, "
              "json_extract(%(t)s.key, '$.seqlen') AS seqlen_bucket, json_extract(%(t)s.key, '$.bh') AS bh_bucket")


def have_matplotlib():
    """Whether matplotlib can be imported here (the plots need it)."""
    try:
        importlib.import_module("matplotlib")
        return True
    except ImportError:
        return False


def json_functions():
    """Whether this SQLite has json_extract (schema 3's views need it; built in from SQLite 3.38)."""
    try:
        sqlite3.connect(":memory:").execute("""SELECT json_extract('{"d": 1}', '$.d')""").fetchone()
        return True
    except sqlite3.Error:
        return False


def make_db(con, schema=2, other_op=False):
    """Fills the empty database of connection con with a device, two kernels, three results (two
    ok in one bucket, one wrong in another) and two misses, in schema 2's form or in schema 3's (as
    the forward operation, 'fwd'; other_op adds results and a miss of a 'bwd' operation). Returns
    con."""
    strict = "STRICT" if sqlite3.sqlite_version_info >= (3, 37, 0) else ""
    if schema == 2:
        bucket, columns, miss_columns = _BUCKET_2, _COLUMNS_2 % {"t": "r"}, _COLUMNS_2 % {"t": "m"}
    else:
        bucket, columns, miss_columns = "op TEXT NOT NULL, key TEXT NOT NULL", _COLUMNS_3 % {"t": "r"}, _COLUMNS_3 % {
            "t": "m"}
    con.executescript(_TABLES % {"version": schema, "s": strict, "bucket": bucket, "columns": columns,
                                 "miss_columns": miss_columns})
    results = [("fwd",) + r for r in RESULTS] + ([("bwd",) + r for r in OTHER_OP_RESULTS] if other_op else [])
    misses = [("fwd",) + m for m in MISSES] + ([("bwd",) + m for m in OTHER_OP_MISSES] if other_op else [])
    if schema == 2:
        def bucket_of(op, b):
            return b
        bucket_names = "dtype, head_dim, causal, seqlen_bucket, bh_bucket"
    else:
        def bucket_of(op, b):
            return (op, json.dumps(dict(zip(("dtype", "d", "causal", "seqlen", "bh"), b)), separators=(",", ":")))
        bucket_names = "op, key"
    marks = ", ".join("?" * len(bucket_of("fwd", RESULTS[0][2])))
    con.executemany("INSERT INTO results (device_id, kernel_id, %s, batch, heads_q, heads_kv, seqlen_q, seqlen_k, "
                    "status, median_ms, tflops, repetitions, driver_version, nvrtc_version, template_hash, "
                    "measured_at) VALUES (?, ?, %s, ?, ?, ?, ?, ?, ?, ?, ?, ?, 13000, '13.0', 't', ?)"
                    % (bucket_names, marks),
                    [r[1:3] + bucket_of(r[0], r[3]) + r[4:] for r in results])
    con.executemany("INSERT INTO misses (device_id, %s, batch, heads_q, heads_kv, seqlen_q, seqlen_k, fallback, "
                    "count) VALUES (?, %s, ?, ?, ?, ?, ?, ?, ?)" % (bucket_names, marks),
                    [m[1:2] + bucket_of(m[0], m[2]) + m[3:] for m in misses])
    con.commit()
    return con


def make_db_file(path, schema=2):
    """make_db in a file."""
    make_db(sqlite3.connect(path), schema).close()


def watch_reads(con):
    """Records what con's statements read from here on: a list of (table or view, column, the view
    the read comes through or None), as SQLite's authorizer reports them."""
    reads = []

    def authorize(action, arg1, arg2, db_name, inner):
        if action == sqlite3.SQLITE_READ:
            reads.append((arg1, arg2, inner))
        return sqlite3.SQLITE_OK
    con.set_authorizer(authorize)
    return reads
