/*
 * The tuning database: schema, migrations and queries (SQLite).
 *
 * ---- For the README: reading the tuning database with the sqlite3 shell -------------------
 *
 * The database is one SQLite file, by default ~/.local/share/flashtune/tuning.db
 * ($FLASHTUNE_DB overrides the path, $XDG_DATA_HOME the directory). It is identified by
 * `PRAGMA application_id` = 0x46544442 ('FTDB') and its schema version is
 * `PRAGMA user_version` (currently 2). It uses a WAL journal, so it may be read while a
 * tune is writing to it: `sqlite3 ~/.local/share/flashtune/tuning.db`.
 *
 * Tables (STRICT):
 *   devices   one row per GPU fingerprint: name, cc, sms, smem_per_block, smem_per_sm,
 *             l2_bytes, driver_version, nvrtc_version (unique together), first_seen.
 *   kernels   one row per compiled variant, unique by (source_hash, arch): family, variant,
 *             arch, template_hash, source_hash, entry, source (TEXT), cubin (BLOB, NULL when
 *             the variant did not compile), registers, spill_stores, spill_loads,
 *             smem_static, smem_dynamic, threads, compile_ms, created_at.
 *   results   one row per (device, kernel, bucket): the bucket (dtype, head_dim, causal,
 *             seqlen_bucket, bh_bucket), the shape measured (batch, heads_q, heads_kv,
 *             seqlen_q, seqlen_k), status (ok, wrong_result, compile_error, over_limits,
 *             launch_failure, fault, timeout), reason, median_ms, iqr_ms, tflops, max_error
 *             (NULL when not measured / not verified), repetitions, measured_at (UTC), and
 *             the driver_version, nvrtc_version and template_hash it was measured under.
 *             Measuring again replaces the row.
 *   misses    the kinds of call the runtime library had no tuned winner for (recorded when
 *             FLASHTUNE_RECORD_MISSES=1): one row per (device, bucket) with the shape of the
 *             first call that missed (batch, heads_q, heads_kv, seqlen_q, seqlen_k), what ran
 *             instead (fallback: nearest, default), count (contexts that missed it),
 *             first_seen and last_seen (UTC). `flashtune tune --misses` tunes them.
 *   meta      key/value: created_by, and the current versions (below).
 *
 * Views:
 *   v_results  every result joined with its device and kernel, readable columns:
 *              result_id, device_id, kernel_id, device, cc, sms, smem_per_block,
 *              smem_per_sm, l2_bytes, family, variant, arch, dtype, head_dim, causal,
 *              seqlen_bucket, bh_bucket, batch, heads_q, heads_kv, seqlen_q, seqlen_k,
 *              status, reason, median_ms, iqr_ms, tflops, max_error, repetitions,
 *              measured_at, driver_version, nvrtc_version, template_hash,
 *              stale (1: measured under other versions than the current ones),
 *              winner (1: the fastest non-stale ok result of its device and bucket;
 *              ties go to the older row).
 *   v_winners  the rows of v_results with winner = 1: one per device and bucket.
 *   v_devices  every device with its number of results and of winning buckets.
 *   v_results_base  v_results without the winner column (cheaper: no window function).
 *   v_misses   every miss with its device's name and tuned (1: the bucket has a winner now).
 *
 * Staleness. A result is stale when the driver version, the NVRTC version or the template
 * hash it was measured under differs from the current one. The current versions are the
 * ones the last flashtune that tuned into this file declared, kept in `meta` under the keys
 * 'driver_version', 'nvrtc_version' and 'template_hash/<family>'; a version that was never
 * declared is not compared. Stale results stay visible but never win until re-measured.
 * (Inside flashtune each open handle judges staleness against the versions it was told
 * through ft__db_set_current, starting from those in meta; it uses per-connection twins
 * of these views, made from the same SQL text, so the C functions and the views agree.)
 *
 * Examples:
 *   .mode box
 *   SELECT device, dtype, head_dim, causal, seqlen_bucket, bh_bucket, variant,
 *          round(median_ms, 4) AS ms, round(tflops, 1) AS tflops
 *     FROM v_winners ORDER BY device, dtype, head_dim, causal, seqlen_bucket, bh_bucket;
 *   SELECT status, count(*) FROM v_results GROUP BY status;
 *   SELECT variant, status, reason FROM v_results WHERE status <> 'ok';
 *   SELECT variant, median_ms, stale, winner FROM v_results
 *     WHERE dtype = 'f16' AND head_dim = 128 AND causal = 1 AND seqlen_bucket = 4096
 *     ORDER BY median_ms IS NULL, median_ms;
 *   SELECT * FROM v_devices;
 *
 * ---- end of the README part ---------------------------------------------------------------
 *
 * Schema versions: `migrations[i]` moves a database from version i to i + 1; a database
 * is brought to FT_DB_SCHEMA_VERSION in one BEGIN IMMEDIATE transaction on open, and the
 * views are recreated at the end of every migration. A new version appends a step.
 */
#define _POSIX_C_SOURCE 200809L
#include "tuning_db/db.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/strbuf.h"

#define FT_DB_APPLICATION_ID 0x46544442 /* 'FTDB' */
#define FT_DB_BUSY_TIMEOUT_MS 10000

/* ---- schema --------------------------------------------------------------------------- */

static const char *const migrations[] = {
    /* 0 -> 1: everything. */
    "CREATE TABLE meta (\n"
    "  key   TEXT PRIMARY KEY,\n"
    "  value ANY\n"
    ") STRICT;\n"
    "CREATE TABLE devices (\n"
    "  id             INTEGER PRIMARY KEY,\n"
    "  name           TEXT NOT NULL,\n"
    "  cc             INTEGER NOT NULL,\n"
    "  sms            INTEGER NOT NULL,\n"
    "  smem_per_block INTEGER NOT NULL,\n"
    "  smem_per_sm    INTEGER NOT NULL,\n"
    "  l2_bytes       INTEGER NOT NULL,\n"
    "  driver_version INTEGER NOT NULL,\n"
    "  nvrtc_version  TEXT NOT NULL,\n"
    "  first_seen     TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  UNIQUE (name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, driver_version, nvrtc_version)\n"
    ") STRICT;\n"
    "CREATE TABLE kernels (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  family        TEXT NOT NULL,\n"
    "  variant       TEXT NOT NULL,\n"
    "  arch          TEXT NOT NULL,\n"
    "  template_hash TEXT NOT NULL,\n"
    "  source_hash   TEXT NOT NULL,\n"
    "  entry         TEXT NOT NULL,\n"
    "  source        TEXT,\n"
    "  cubin         BLOB,\n"
    "  registers     INTEGER NOT NULL,\n"
    "  spill_stores  INTEGER NOT NULL,\n"
    "  spill_loads   INTEGER NOT NULL,\n"
    "  smem_static   INTEGER NOT NULL,\n"
    "  smem_dynamic  INTEGER NOT NULL,\n"
    "  threads       INTEGER NOT NULL,\n"
    "  compile_ms    REAL,\n"
    "  created_at    TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  UNIQUE (source_hash, arch)\n"
    ") STRICT;\n"
    "CREATE INDEX kernels_family ON kernels (family, variant);\n"
    "CREATE TABLE results (\n"
    "  id             INTEGER PRIMARY KEY,\n"
    "  device_id      INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,\n"
    "  kernel_id      INTEGER NOT NULL REFERENCES kernels (id) ON DELETE CASCADE,\n"
    "  dtype          TEXT NOT NULL,\n"
    "  head_dim       INTEGER NOT NULL,\n"
    "  causal         INTEGER NOT NULL CHECK (causal IN (0, 1)),\n"
    "  seqlen_bucket  INTEGER NOT NULL,\n"
    "  bh_bucket      INTEGER NOT NULL,\n"
    "  batch          INTEGER NOT NULL,\n"
    "  heads_q        INTEGER NOT NULL,\n"
    "  heads_kv       INTEGER NOT NULL,\n"
    "  seqlen_q       INTEGER NOT NULL,\n"
    "  seqlen_k       INTEGER NOT NULL,\n"
    "  status         TEXT NOT NULL CHECK (status IN ('ok', 'wrong_result', 'compile_error',\n"
    "                   'over_limits', 'launch_failure', 'fault', 'timeout')),\n"
    "  reason         TEXT NOT NULL DEFAULT '',\n"
    "  median_ms      REAL,\n"
    "  iqr_ms         REAL,\n"
    "  tflops         REAL,\n"
    "  max_error      REAL,\n"
    "  repetitions    INTEGER NOT NULL DEFAULT 0,\n"
    "  driver_version INTEGER NOT NULL,\n"
    "  nvrtc_version  TEXT NOT NULL,\n"
    "  template_hash  TEXT NOT NULL,\n"
    "  measured_at    TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  UNIQUE (device_id, kernel_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket)\n"
    ") STRICT;\n"
    "CREATE INDEX results_bucket ON results\n"
    "  (device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket, median_ms);\n"
    "CREATE INDEX results_kernel ON results (kernel_id);\n"
    "INSERT INTO meta (key, value) VALUES ('created_by', 'flashtune " FT_VERSION_STRING "');\n",
    /* 1 -> 2: the runtime's misses. */
    "CREATE TABLE misses (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  device_id     INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,\n"
    "  dtype         TEXT NOT NULL,\n"
    "  head_dim      INTEGER NOT NULL,\n"
    "  causal        INTEGER NOT NULL CHECK (causal IN (0, 1)),\n"
    "  seqlen_bucket INTEGER NOT NULL,\n"
    "  bh_bucket     INTEGER NOT NULL,\n"
    "  batch         INTEGER NOT NULL,\n"
    "  heads_q       INTEGER NOT NULL,\n"
    "  heads_kv      INTEGER NOT NULL,\n"
    "  seqlen_q      INTEGER NOT NULL,\n"
    "  seqlen_k      INTEGER NOT NULL,\n"
    "  fallback      TEXT NOT NULL,\n"
    "  count         INTEGER NOT NULL DEFAULT 1,\n"
    "  first_seen    TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  last_seen     TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  UNIQUE (device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket)\n"
    ") STRICT;\n",
};

_Static_assert(sizeof migrations / sizeof migrations[0] == FT_DB_SCHEMA_VERSION,
               "one migration step per schema version");

/* The views, made twice from the same text: in the file (the current versions from `meta`,
 * for the sqlite3 shell) and as TEMP views of each connection (the current versions from
 * the connection's temp.ft_current, which ft__db_set_current fills). The first %s is ""
 * or "TEMP ", the others the table holding the current versions. */
static const char view_base_fmt[] =
    "CREATE %sVIEW v_results_base AS\n"
    "SELECT r.id AS result_id, r.device_id, r.kernel_id, d.name AS device, d.cc, d.sms,\n"
    "       d.smem_per_block, d.smem_per_sm, d.l2_bytes, k.family, k.variant, k.arch,\n"
    "       r.dtype, r.head_dim, r.causal, r.seqlen_bucket, r.bh_bucket, r.batch,\n"
    "       r.heads_q, r.heads_kv, r.seqlen_q, r.seqlen_k, r.status, r.reason,\n"
    "       r.median_ms, r.iqr_ms, r.tflops, r.max_error, r.repetitions, r.measured_at,\n"
    "       r.driver_version, r.nvrtc_version, r.template_hash,\n"
    "       (coalesce((SELECT value FROM %s WHERE key = 'driver_version'),\n"
    "                 r.driver_version) <> r.driver_version\n"
    "        OR coalesce((SELECT value FROM %s WHERE key = 'nvrtc_version'),\n"
    "                    r.nvrtc_version) <> r.nvrtc_version\n"
    "        OR coalesce((SELECT value FROM %s WHERE key = 'template_hash/' || k.family),\n"
    "                    r.template_hash) <> r.template_hash) AS stale\n"
    "FROM results r\n"
    "JOIN devices d ON d.id = r.device_id\n"
    "JOIN kernels k ON k.id = r.kernel_id;\n";

/* What makes a result a candidate for its bucket's winner (in v_results_base's columns). */
#define WINNER_COND "status = 'ok' AND stale = 0 AND median_ms IS NOT NULL"

/* A miss's bucket has a winner for its device now (from view, v_results_base in some schema). */
#define MISS_TUNED(view)                                                                          \
    "EXISTS (SELECT 1 FROM " view " r WHERE r.device_id = m.device_id AND r.dtype = m.dtype "     \
    "AND r.head_dim = m.head_dim AND r.causal = m.causal AND r.seqlen_bucket = m.seqlen_bucket "  \
    "AND r.bh_bucket = m.bh_bucket AND " WINNER_COND ") AS tuned"

static const char view_results_fmt[] =
    "CREATE %sVIEW v_results AS\n"
    "SELECT *,\n"
    "       CASE WHEN " WINNER_COND "\n"
    "            THEN row_number() OVER (\n"
    "                   PARTITION BY device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket,\n"
    "                                " WINNER_COND "\n"
    "                   ORDER BY median_ms, result_id) = 1\n"
    "            ELSE 0 END AS winner\n"
    "FROM v_results_base;\n";

static const char view_winners_fmt[] =
    "CREATE %sVIEW v_winners AS\n"
    "SELECT * FROM v_results WHERE winner = 1;\n";

static const char view_devices_fmt[] =
    "CREATE %sVIEW v_devices AS\n"
    "SELECT d.id AS device_id, d.name AS device, d.cc, d.sms, d.smem_per_block, d.smem_per_sm,\n"
    "       d.l2_bytes, d.driver_version, d.nvrtc_version, d.first_seen,\n"
    "       coalesce(r.n, 0) AS results, coalesce(w.n, 0) AS winners\n"
    "FROM devices d\n"
    "LEFT JOIN (SELECT device_id, count(*) AS n FROM results GROUP BY device_id) r\n"
    "  ON r.device_id = d.id\n"
    "LEFT JOIN (SELECT device_id, count(*) AS n FROM v_winners GROUP BY device_id) w\n"
    "  ON w.device_id = d.id;\n";

/* Only in the file (the library's queries join the tables themselves). */
static const char view_misses_sql[] =
    "CREATE VIEW v_misses AS\n"
    "SELECT m.id AS miss_id, m.device_id, d.name AS device, m.dtype, m.head_dim, m.causal,\n"
    "       m.seqlen_bucket, m.bh_bucket, m.batch, m.heads_q, m.heads_kv, m.seqlen_q,\n"
    "       m.seqlen_k, m.fallback, m.count, m.first_seen, m.last_seen,\n"
    "       " MISS_TUNED("v_results_base") "\n"
    "FROM misses m\n"
    "JOIN devices d ON d.id = m.device_id;\n";

static const char drop_views_sql[] =
    "DROP VIEW IF EXISTS v_misses;\n"
    "DROP VIEW IF EXISTS v_devices;\n"
    "DROP VIEW IF EXISTS v_winners;\n"
    "DROP VIEW IF EXISTS v_results;\n"
    "DROP VIEW IF EXISTS v_results_base;\n";

static const char temp_setup_sql[] =
    "CREATE TEMP TABLE ft_current (key TEXT PRIMARY KEY, value ANY) STRICT;\n"
    "INSERT INTO temp.ft_current (key, value)\n"
    "  SELECT key, value FROM main.meta\n"
    "  WHERE key IN ('driver_version', 'nvrtc_version') OR key GLOB 'template_hash/*';\n";

/* ---- statements, prepared once per handle ---------------------------------------------- */

/* The columns of a row (ft_db_row), in the order of the enum below. */
#define ROW_COLUMNS                                                                          \
    "result_id, device_id, kernel_id, device, cc, sms, smem_per_block, smem_per_sm, "        \
    "l2_bytes, family, variant, arch, template_hash, dtype, head_dim, causal, seqlen_bucket, " \
    "bh_bucket, batch, heads_q, heads_kv, seqlen_q, seqlen_k, status, reason, median_ms, "   \
    "iqr_ms, tflops, max_error, repetitions, measured_at, driver_version, nvrtc_version, "   \
    "stale, winner"

enum row_col {
    RC_RESULT_ID, RC_DEVICE_ID, RC_KERNEL_ID, RC_DEVICE, RC_CC, RC_SMS, RC_SMEM_PER_BLOCK,
    RC_SMEM_PER_SM, RC_L2_BYTES, RC_FAMILY, RC_VARIANT, RC_ARCH, RC_TEMPLATE_HASH, RC_DTYPE,
    RC_HEAD_DIM, RC_CAUSAL, RC_SEQLEN_BUCKET, RC_BH_BUCKET, RC_BATCH, RC_HEADS_Q, RC_HEADS_KV,
    RC_SEQLEN_Q, RC_SEQLEN_K, RC_STATUS, RC_REASON, RC_MEDIAN_MS, RC_IQR_MS, RC_TFLOPS,
    RC_MAX_ERROR, RC_REPETITIONS, RC_MEASURED_AT, RC_DRIVER_VERSION, RC_NVRTC_VERSION,
    RC_STALE, RC_WINNER, RC_COUNT
};

static const char *const row_col_names[RC_COUNT] = {
    "result_id", "device_id", "kernel_id", "device", "cc", "sms", "smem_per_block",
    "smem_per_sm", "l2_bytes", "family", "variant", "arch", "template_hash", "dtype",
    "head_dim", "causal", "seqlen_bucket", "bh_bucket", "batch", "heads_q", "heads_kv",
    "seqlen_q", "seqlen_k", "status", "reason", "median_ms", "iqr_ms", "tflops",
    "max_error", "repetitions", "measured_at", "driver_version", "nvrtc_version", "stale",
    "winner",
};

#define BUCKET_MATCH                                                                         \
    "dtype = :dtype AND head_dim = :head_dim AND causal = :causal "                          \
    "AND seqlen_bucket = :seqlen_bucket AND bh_bucket = :bh_bucket"

enum stmt_id {
    ST_BEGIN_IMMEDIATE,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_DEVICE_FIND,
    ST_DEVICE_INSERT,
    ST_KERNEL_FIND,
    ST_KERNEL_UPSERT,
    ST_META_SET,
    ST_CURRENT_SET,
    ST_RECORD,
    ST_HAS_RESULT,
    ST_WINNER,
    ST_QUERY,
    ST_DEVICES,
    ST_KERNEL_GET,
    ST_RESULT_WHEN,
    ST_MISS_RECORD,
    ST_MISSES,
    ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_DEVICE_FIND] =
        "SELECT id FROM main.devices WHERE name = :name AND cc = :cc AND sms = :sms "
        "AND smem_per_block = :smem_per_block AND smem_per_sm = :smem_per_sm "
        "AND l2_bytes = :l2_bytes AND driver_version = :driver_version "
        "AND nvrtc_version = :nvrtc_version",
    [ST_DEVICE_INSERT] =
        "INSERT INTO main.devices (name, cc, sms, smem_per_block, smem_per_sm, l2_bytes, "
        "driver_version, nvrtc_version) VALUES (:name, :cc, :sms, :smem_per_block, "
        ":smem_per_sm, :l2_bytes, :driver_version, :nvrtc_version) RETURNING id",
    /* same = 1 when the stored row already says what the caller says. */
    [ST_KERNEL_FIND] =
        "SELECT id, family = :family AND variant = :variant AND template_hash = :template_hash "
        "AND entry = :entry AND (:source IS NULL OR source IS :source) "
        "AND (:cubin IS NULL OR cubin IS :cubin) AS same "
        "FROM main.kernels WHERE source_hash = :source_hash AND arch = :arch",
    /* The latest description wins, but a missing cubin or source does not erase a stored
     * one (the resource report goes with the cubin). */
    [ST_KERNEL_UPSERT] =
        "INSERT INTO main.kernels (family, variant, arch, template_hash, source_hash, entry, "
        "source, cubin, registers, spill_stores, spill_loads, smem_static, smem_dynamic, "
        "threads, compile_ms) VALUES (:family, :variant, :arch, :template_hash, :source_hash, "
        ":entry, :source, :cubin, :registers, :spill_stores, :spill_loads, :smem_static, "
        ":smem_dynamic, :threads, :compile_ms) "
        "ON CONFLICT (source_hash, arch) DO UPDATE SET family = excluded.family, "
        "variant = excluded.variant, template_hash = excluded.template_hash, "
        "entry = excluded.entry, source = coalesce(excluded.source, source), "
        "cubin = coalesce(excluded.cubin, cubin), "
        "registers = iif(excluded.cubin IS NULL, registers, excluded.registers), "
        "spill_stores = iif(excluded.cubin IS NULL, spill_stores, excluded.spill_stores), "
        "spill_loads = iif(excluded.cubin IS NULL, spill_loads, excluded.spill_loads), "
        "smem_static = iif(excluded.cubin IS NULL, smem_static, excluded.smem_static), "
        "smem_dynamic = iif(excluded.cubin IS NULL, smem_dynamic, excluded.smem_dynamic), "
        "threads = iif(excluded.cubin IS NULL, threads, excluded.threads), "
        "compile_ms = iif(excluded.cubin IS NULL, compile_ms, excluded.compile_ms) "
        "RETURNING id",
    [ST_META_SET] =
        "INSERT INTO main.meta (key, value) VALUES (:key, :value) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [ST_CURRENT_SET] =
        "INSERT INTO temp.ft_current (key, value) VALUES (:key, :value) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    /* The versions measured under are those of the device and the kernel rows. */
    [ST_RECORD] =
        "INSERT INTO main.results (device_id, kernel_id, dtype, head_dim, causal, seqlen_bucket, "
        "bh_bucket, batch, heads_q, heads_kv, seqlen_q, seqlen_k, status, reason, median_ms, "
        "iqr_ms, tflops, max_error, repetitions, driver_version, nvrtc_version, template_hash) "
        "SELECT d.id, k.id, :dtype, :head_dim, :causal, :seqlen_bucket, :bh_bucket, :batch, "
        ":heads_q, :heads_kv, :seqlen_q, :seqlen_k, :status, :reason, :median_ms, :iqr_ms, "
        ":tflops, :max_error, :repetitions, d.driver_version, d.nvrtc_version, k.template_hash "
        "FROM main.devices d, main.kernels k WHERE d.id = :device_id AND k.id = :kernel_id "
        "ON CONFLICT (device_id, kernel_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket) "
        "DO UPDATE SET batch = excluded.batch, heads_q = excluded.heads_q, "
        "heads_kv = excluded.heads_kv, seqlen_q = excluded.seqlen_q, "
        "seqlen_k = excluded.seqlen_k, status = excluded.status, reason = excluded.reason, "
        "median_ms = excluded.median_ms, iqr_ms = excluded.iqr_ms, tflops = excluded.tflops, "
        "max_error = excluded.max_error, repetitions = excluded.repetitions, "
        "driver_version = excluded.driver_version, nvrtc_version = excluded.nvrtc_version, "
        "template_hash = excluded.template_hash, measured_at = CURRENT_TIMESTAMP",
    [ST_HAS_RESULT] =
        "SELECT 1 FROM temp.v_results_base WHERE device_id = :device_id AND " BUCKET_MATCH
        " AND kernel_id = :kernel_id AND stale = 0",
    [ST_WINNER] =
        "SELECT " ROW_COLUMNS ", CASE WHEN :want_cubin THEN "
        "(SELECT cubin FROM main.kernels k WHERE k.id = w.kernel_id) END AS cubin "
        "FROM temp.v_winners w WHERE device_id = :device_id AND " BUCKET_MATCH,
    [ST_QUERY] =
        "SELECT " ROW_COLUMNS " FROM temp.v_results "
        "WHERE (:device_name IS NULL OR instr(lower(device), lower(:device_name)) > 0) "
        "AND (:dtype IS NULL OR dtype = :dtype) "
        "AND (:head_dim < 0 OR head_dim = :head_dim) "
        "AND (:causal < 0 OR causal = :causal) "
        "AND (:winners_only = 0 OR winner = 1) "
        "ORDER BY device, device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket, "
        "median_ms IS NULL, median_ms, result_id",
    [ST_DEVICES] =
        "SELECT device_id, device, cc, sms, smem_per_block, smem_per_sm, l2_bytes, "
        "driver_version, nvrtc_version, results, winners FROM temp.v_devices "
        "ORDER BY device, device_id",
    [ST_KERNEL_GET] =
        "SELECT family, variant, arch, template_hash, source_hash, entry, source, cubin, registers, "
        "spill_stores, spill_loads, smem_static, smem_dynamic, threads, compile_ms "
        "FROM main.kernels WHERE id = :id",
    [ST_RESULT_WHEN] =
        "UPDATE main.results SET measured_at = :measured_at "
        "WHERE device_id = :device_id AND kernel_id = :kernel_id AND " BUCKET_MATCH,
    /* The shape stays that of the first call that missed; the fallback is the latest. */
    [ST_MISS_RECORD] =
        "INSERT INTO main.misses (device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket, "
        "batch, heads_q, heads_kv, seqlen_q, seqlen_k, fallback) VALUES (:device_id, :dtype, "
        ":head_dim, :causal, :seqlen_bucket, :bh_bucket, :batch, :heads_q, :heads_kv, :seqlen_q, "
        ":seqlen_k, :fallback) "
        "ON CONFLICT (device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket) DO UPDATE SET "
        "count = count + 1, last_seen = CURRENT_TIMESTAMP, fallback = excluded.fallback",
    /* tuned: the bucket has a winner (a non-stale ok result) for the device now. */
    [ST_MISSES] =
        "SELECT m.device_id, d.name, d.cc, d.sms, d.smem_per_block, d.smem_per_sm, d.l2_bytes, "
        "d.driver_version, d.nvrtc_version, m.dtype, m.head_dim, m.causal, m.seqlen_bucket, "
        "m.bh_bucket, m.batch, m.heads_q, m.heads_kv, m.seqlen_q, m.seqlen_k, m.fallback, m.count, "
        "m.first_seen, m.last_seen, "
        MISS_TUNED("temp.v_results_base") " "
        "FROM main.misses m JOIN main.devices d ON d.id = m.device_id "
        "WHERE (:device_name IS NULL OR instr(lower(d.name), lower(:device_name)) > 0) "
        "AND (:device_id < 0 OR m.device_id = :device_id) "
        "ORDER BY d.name, m.device_id, m.dtype, m.head_dim, m.causal, m.seqlen_bucket, m.bh_bucket",
};

struct ft_db {
    sqlite3 *sq;
    char *path;
    int read_only;
    int version;               /* the file's schema version (older ones are read as they are) */
    int batch;                 /* inside ft__db_batch_begin: the calls' own transactions join it */
    sqlite3_stmt *stmt[ST_COUNT];
};

/* The handle's cached statement id, prepared on first use. */
static ft_status get_stmt(ft_db *db, enum stmt_id id, sqlite3_stmt **out, ft_err *err);

/* ---- small helpers ----------------------------------------------------------------------- */

/* SQLite's message for the connection's last error; a lock that outlasted the busy timeout
 * says so (SQLite's own text, "database is locked", does not say who or for how long). */
static ft_status sqlite_fail(ft_db *db, ft_err *err, const char *what, const char *msg)
{
    int code = sqlite3_extended_errcode(db->sq) & 0xff;

    if (code == SQLITE_BUSY)
        return ft__fail(err, FT_ERR_DATABASE,
                        "%s: %s: another process holds a lock on the database (gave up after %d s)",
                        db->path, what, FT_DB_BUSY_TIMEOUT_MS / 1000);
    return ft__fail(err, FT_ERR_DATABASE, "%s: %s: %s", db->path, what, msg);
}

static ft_status db_fail(ft_db *db, ft_err *err, const char *what)
{
    return sqlite_fail(db, err, what, sqlite3_errmsg(db->sq));
}

/* Ends a use of a cached statement: ready for the next one, no pointers to caller memory. */
static void stmt_done(sqlite3_stmt *s)
{
    if (s != NULL) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

/* Runs a cached statement that returns no rows. */
static ft_status exec_stmt(ft_db *db, enum stmt_id id, const char *what, ft_err *err)
{
    sqlite3_stmt *s = NULL;
    ft_status rc = get_stmt(db, id, &s, err);

    if (rc != FT_OK)
        goto out;
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = db_fail(db, err, what);
out:
    stmt_done(s);
    return rc;
}

/* A write transaction (BEGIN IMMEDIATE; a read-only handle only writes its temp tables). */
static ft_status tx_begin(ft_db *db, ft_err *err)
{
    if (db->batch)
        return FT_OK; /* part of the batch's transaction */
    return exec_stmt(db, db->read_only ? ST_BEGIN : ST_BEGIN_IMMEDIATE,
                     "cannot begin a transaction", err);
}

/* Commits when rc is FT_OK, else rolls back; returns rc or the commit's failure. Inside a
 * batch it does neither: ft__db_batch_end decides for the whole batch. */
static ft_status tx_end(ft_db *db, ft_status rc, ft_err *err)
{
    if (db->batch)
        return rc;
    if (rc == FT_OK)
        rc = exec_stmt(db, ST_COMMIT, "cannot commit", err);
    if (rc != FT_OK && !sqlite3_get_autocommit(db->sq))
        exec_stmt(db, ST_ROLLBACK, "cannot roll back", NULL);
    return rc;
}

/* Binding by parameter name; the first failure sticks. */
typedef struct binder {
    sqlite3_stmt *s;
    int rc;
    const char *bad; /* the parameter that failed */
} binder;

static int param_index(binder *b, const char *name)
{
    int i;

    if (b->rc != SQLITE_OK)
        return 0;
    i = sqlite3_bind_parameter_index(b->s, name);
    if (i == 0) {
        b->rc = SQLITE_RANGE;
        b->bad = name;
    }
    return i;
}

static void bind_check(binder *b, int src, const char *name)
{
    if (src != SQLITE_OK) {
        b->rc = src;
        b->bad = name;
    }
}

static void bind_int(binder *b, const char *name, long long v)
{
    int i = param_index(b, name);
    if (i > 0)
        bind_check(b, sqlite3_bind_int64(b->s, i, v), name);
}

/* NaN is stored as NULL. */
static void bind_real(binder *b, const char *name, double v)
{
    int i = param_index(b, name);
    if (i > 0)
        bind_check(b, isnan(v) ? sqlite3_bind_null(b->s, i) : sqlite3_bind_double(b->s, i, v), name);
}

/* A string from a fixed-size field (cap bytes, NUL-terminated within them, or cut there);
 * NULL binds NULL. */
static void bind_text(binder *b, const char *name, const char *v, size_t cap)
{
    int i = param_index(b, name);
    if (i <= 0)
        return;
    if (v == NULL)
        bind_check(b, sqlite3_bind_null(b->s, i), name);
    else
        bind_check(b, sqlite3_bind_text64(b->s, i, v, strnlen(v, cap), SQLITE_STATIC, SQLITE_UTF8),
                   name);
}

static void bind_blob(binder *b, const char *name, const void *v, size_t n)
{
    int i = param_index(b, name);
    if (i <= 0)
        return;
    if (v == NULL || n == 0)
        bind_check(b, sqlite3_bind_null(b->s, i), name);
    else
        bind_check(b, sqlite3_bind_blob64(b->s, i, v, (sqlite3_uint64)n, SQLITE_STATIC), name);
}

/* A write: opens the transaction (*began = 1 once open, for tx_end) and fetches the statement. */
static ft_status write_begin(ft_db *db, enum stmt_id id, sqlite3_stmt **s, int *began, ft_err *err)
{
    ft_status rc = tx_begin(db, err);

    if (rc != FT_OK)
        return rc;
    *began = 1;
    return get_stmt(db, id, s, err);
}

/* The measured shape of a result or a miss. */
static void bind_shape(binder *b, int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k)
{
    bind_int(b, ":batch", batch);
    bind_int(b, ":heads_q", heads_q);
    bind_int(b, ":heads_kv", heads_kv);
    bind_int(b, ":seqlen_q", seqlen_q);
    bind_int(b, ":seqlen_k", seqlen_k);
}

static void bind_bucket(binder *b, const ft_db_bucket *k)
{
    bind_text(b, ":dtype", k->dtype, sizeof k->dtype);
    bind_int(b, ":head_dim", k->head_dim);
    bind_int(b, ":causal", k->causal != 0);
    bind_int(b, ":seqlen_bucket", k->seqlen_bucket);
    bind_int(b, ":bh_bucket", k->bh_bucket);
}

static ft_status bind_fail(ft_db *db, const binder *b, ft_err *err)
{
    if (b->rc == SQLITE_RANGE)
        return ft__fail(err, FT_ERR_INTERNAL, "%s: no parameter %s in a statement", db->path,
                        b->bad != NULL ? b->bad : "?");
    return ft__fail(err, FT_ERR_DATABASE, "%s: cannot bind %s: %s", db->path,
                    b->bad != NULL ? b->bad : "?", sqlite3_errstr(b->rc));
}

/* Steps a statement that returns one id row (RETURNING id) to its end. */
static ft_status step_id(ft_db *db, sqlite3_stmt *s, long long *id, const char *what, ft_err *err)
{
    ft_status rc = FT_ERR_DATABASE;
    int src = sqlite3_step(s);

    if (src != SQLITE_ROW) {
        if (src == SQLITE_DONE)
            ft__fail(err, FT_ERR_INTERNAL, "%s: %s: no row returned", db->path, what);
        else
            db_fail(db, err, what);
        goto out;
    }
    *id = sqlite3_column_int64(s, 0);
    if (sqlite3_step(s) != SQLITE_DONE) {
        db_fail(db, err, what);
        goto out;
    }
    rc = FT_OK;
out:
    return rc;
}

static void column_text(sqlite3_stmt *s, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    snprintf(dst, cap, "%s", t != NULL ? (const char *)t : "");
}

/* A device's fingerprint from columns first .. first + 7: name, cc, sms, smem_per_block,
 * smem_per_sm, l2_bytes, driver_version, nvrtc_version (as the device listings select them). */
static void column_device(sqlite3_stmt *s, int first, ft_db_device *dev)
{
    column_text(s, first, dev->name, sizeof dev->name);
    dev->cc = sqlite3_column_int(s, first + 1);
    dev->sms = sqlite3_column_int(s, first + 2);
    dev->smem_per_block = sqlite3_column_int64(s, first + 3);
    dev->smem_per_sm = sqlite3_column_int64(s, first + 4);
    dev->l2_bytes = sqlite3_column_int64(s, first + 5);
    dev->driver_version = sqlite3_column_int(s, first + 6);
    column_text(s, first + 7, dev->nvrtc_version, sizeof dev->nvrtc_version);
}

static double column_real(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL ? NAN : sqlite3_column_double(s, col);
}

/* The statements that return rows check, when prepared, that their columns are in the
 * enum's order. */
static ft_status check_row_columns(ft_db *db, sqlite3_stmt *s, ft_err *err)
{
    ft_status rc = FT_ERR_INTERNAL;
    int i;

    if (sqlite3_column_count(s) < RC_COUNT) {
        ft__fail(err, rc, "%s: a row query has %d columns, not %d", db->path,
                 sqlite3_column_count(s), (int)RC_COUNT);
        goto out;
    }
    for (i = 0; i < RC_COUNT; i++) {
        const char *name = sqlite3_column_name(s, i);
        if (name == NULL || strcmp(name, row_col_names[i]) != 0) {
            ft__fail(err, rc, "%s: column %d of a row query is %s, not %s", db->path, i,
                     name != NULL ? name : "(null)", row_col_names[i]);
            goto out;
        }
    }
    rc = FT_OK;
out:
    return rc;
}

static ft_status get_stmt(ft_db *db, enum stmt_id id, sqlite3_stmt **out, ft_err *err)
{
    ft_status rc = FT_OK;

    *out = NULL;
    if (db->stmt[id] == NULL) {
        int src = sqlite3_prepare_v3(db->sq, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                     &db->stmt[id], NULL);
        if (src != SQLITE_OK) {
            rc = db_fail(db, err, "cannot prepare a statement");
            goto out;
        }
        if (id == ST_WINNER || id == ST_QUERY)
            rc = check_row_columns(db, db->stmt[id], err);
        if (rc != FT_OK) {
            sqlite3_finalize(db->stmt[id]);
            db->stmt[id] = NULL;
            goto out;
        }
    }
    *out = db->stmt[id];
out:
    return rc;
}

static ft_status read_row(ft_db *db, sqlite3_stmt *s, ft_db_row *row, ft_err *err)
{
    ft_status rc = FT_OK;
    ft_db_result *r = &row->result;
    char status[32];

    memset(row, 0, sizeof *row);
    r->device_id = sqlite3_column_int64(s, RC_DEVICE_ID);
    r->kernel_id = sqlite3_column_int64(s, RC_KERNEL_ID);
    column_text(s, RC_DTYPE, r->bucket.dtype, sizeof r->bucket.dtype);
    r->bucket.head_dim = sqlite3_column_int(s, RC_HEAD_DIM);
    r->bucket.causal = sqlite3_column_int(s, RC_CAUSAL);
    r->bucket.seqlen_bucket = sqlite3_column_int(s, RC_SEQLEN_BUCKET);
    r->bucket.bh_bucket = sqlite3_column_int(s, RC_BH_BUCKET);
    r->batch = sqlite3_column_int(s, RC_BATCH);
    r->heads_q = sqlite3_column_int(s, RC_HEADS_Q);
    r->heads_kv = sqlite3_column_int(s, RC_HEADS_KV);
    r->seqlen_q = sqlite3_column_int(s, RC_SEQLEN_Q);
    r->seqlen_k = sqlite3_column_int(s, RC_SEQLEN_K);
    column_text(s, RC_STATUS, status, sizeof status);
    if (!ft__result_status_parse(status, &r->status)) {
        rc = ft__fail(err, FT_ERR_CORRUPT, "%s: result %lld has an unknown status '%s'", db->path,
                      (long long)sqlite3_column_int64(s, RC_RESULT_ID), status);
        goto out;
    }
    column_text(s, RC_REASON, r->reason, sizeof r->reason);
    r->median_ms = column_real(s, RC_MEDIAN_MS);
    r->iqr_ms = column_real(s, RC_IQR_MS);
    r->tflops = column_real(s, RC_TFLOPS);
    r->max_error = column_real(s, RC_MAX_ERROR);
    r->repetitions = sqlite3_column_int(s, RC_REPETITIONS);

    column_text(s, RC_DEVICE, row->device.name, sizeof row->device.name);
    row->device.cc = sqlite3_column_int(s, RC_CC);
    row->device.sms = sqlite3_column_int(s, RC_SMS);
    row->device.smem_per_block = sqlite3_column_int64(s, RC_SMEM_PER_BLOCK);
    row->device.smem_per_sm = sqlite3_column_int64(s, RC_SMEM_PER_SM);
    row->device.l2_bytes = sqlite3_column_int64(s, RC_L2_BYTES);
    row->device.driver_version = sqlite3_column_int(s, RC_DRIVER_VERSION);
    column_text(s, RC_NVRTC_VERSION, row->device.nvrtc_version, sizeof row->device.nvrtc_version);

    column_text(s, RC_FAMILY, row->family, sizeof row->family);
    column_text(s, RC_VARIANT, row->variant, sizeof row->variant);
    column_text(s, RC_ARCH, row->arch, sizeof row->arch);
    column_text(s, RC_TEMPLATE_HASH, row->template_hash, sizeof row->template_hash);
    column_text(s, RC_MEASURED_AT, row->measured_at, sizeof row->measured_at);
    row->stale = sqlite3_column_int(s, RC_STALE) != 0;
    row->winner = sqlite3_column_int(s, RC_WINNER) != 0;
out:
    return rc;
}

/* ---- statuses and buckets ---------------------------------------------------------------- */

static const char *const status_names[] = {
    [FT_RESULT_OK] = "ok",
    [FT_RESULT_WRONG_RESULT] = "wrong_result",
    [FT_RESULT_COMPILE_ERROR] = "compile_error",
    [FT_RESULT_OVER_LIMITS] = "over_limits",
    [FT_RESULT_LAUNCH_FAILURE] = "launch_failure",
    [FT_RESULT_FAULT] = "fault",
    [FT_RESULT_TIMEOUT] = "timeout",
};

#define STATUS_COUNT ((int)(sizeof status_names / sizeof status_names[0]))

const char *ft__result_status_name(ft_result_status s)
{
    if ((int)s < 0 || (int)s >= STATUS_COUNT)
        return "unknown";
    return status_names[s];
}

int ft__result_status_parse(const char *name, ft_result_status *out)
{
    int i;

    if (name == NULL)
        return 0;
    for (i = 0; i < STATUS_COUNT; i++) {
        if (strcmp(name, status_names[i]) == 0) {
            if (out != NULL)
                *out = (ft_result_status)i;
            return 1;
        }
    }
    return 0;
}

/* The smallest power of two >= v and >= lo (capped at 2^30). */
static int pow2_at_least(long long v, int lo)
{
    long long p = lo;

    while (p < v && p < (1LL << 30))
        p *= 2;
    return (int)p;
}

void ft__db_bucket(const char *dtype, int head_dim, int causal, int batch, int heads_q,
                   int seqlen_q, int seqlen_k, ft_db_bucket *out)
{
    long long seqlen = seqlen_q > seqlen_k ? seqlen_q : seqlen_k;

    memset(out, 0, sizeof *out);
    snprintf(out->dtype, sizeof out->dtype, "%s", dtype != NULL ? dtype : "");
    out->head_dim = head_dim;
    out->causal = causal != 0;
    out->seqlen_bucket = pow2_at_least(seqlen, 64);
    out->bh_bucket = pow2_at_least((long long)batch * heads_q, 1);
}

int ft__db_device_same_model(const ft_db_device *a, const ft_db_device *b)
{
    return strcmp(a->name, b->name) == 0 && a->cc == b->cc && a->sms == b->sms &&
           a->smem_per_block == b->smem_per_block && a->smem_per_sm == b->smem_per_sm && a->l2_bytes == b->l2_bytes;
}

int ft__db_device_same_driver(const ft_db_device *a, const ft_db_device *b)
{
    return a->driver_version == b->driver_version && strcmp(a->nvrtc_version, b->nvrtc_version) == 0;
}

int ft__db_bucket_equal(const ft_db_bucket *a, const ft_db_bucket *b)
{
    return a->head_dim == b->head_dim && a->causal == b->causal && a->seqlen_bucket == b->seqlen_bucket &&
           a->bh_bucket == b->bh_bucket && strcmp(a->dtype, b->dtype) == 0;
}

void ft__db_filter_init(ft_db_filter *f)
{
    f->device_name = NULL;
    f->dtype = NULL;
    f->head_dim = -1;
    f->causal = -1;
    f->winners_only = 0;
}

/* ---- opening, identifying, migrating ----------------------------------------------------- */

/* What a file holds, read from its header and schema. */
typedef struct db_identity {
    long long application_id;
    long long user_version;
    long long objects; /* entries in sqlite_schema */
} db_identity;

/* *code is SQLite's result code of the read (SQLITE_ROW when it succeeded). */
static ft_status read_identity(ft_db *db, db_identity *id, int *code, ft_err *err)
{
    static const char sql[] = "SELECT (SELECT application_id FROM pragma_application_id), "
                              "(SELECT user_version FROM pragma_user_version), "
                              "(SELECT count(*) FROM main.sqlite_schema)";
    ft_status rc = FT_ERR_DATABASE;
    sqlite3_stmt *s = NULL;
    int src;

    src = sqlite3_prepare_v2(db->sq, sql, -1, &s, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_step(s);
    *code = src;
    if (src != SQLITE_ROW) {
        if ((src & 0xff) == SQLITE_NOTADB) /* random bytes, a truncated header, ... */
            ft__fail(err, FT_ERR_DATABASE, "%s is not a flashtune tuning database: %s", db->path,
                     sqlite3_errmsg(db->sq));
        else
            db_fail(db, err, "cannot read the database header");
        goto out;
    }
    id->application_id = sqlite3_column_int64(s, 0);
    id->user_version = sqlite3_column_int64(s, 1);
    id->objects = sqlite3_column_int64(s, 2);
    rc = FT_OK;
out:
    sqlite3_finalize(s);
    return rc;
}

/* FT_OK with *version (0 for a new, empty file) when the file is a flashtune database this
 * build reads; FT_ERR_DATABASE otherwise. A file with flashtune's application id, tables and
 * no schema version is not "new": something else made it, or it lost its version. */
static ft_status classify(ft_db *db, const db_identity *id, int *version, ft_err *err)
{
    ft_status rc = FT_ERR_DATABASE;

    if (id->application_id == 0 && id->user_version == 0 && id->objects == 0) {
        *version = 0; /* new or empty: ours to initialise */
    } else if (id->application_id != FT_DB_APPLICATION_ID) {
        ft__fail(err, rc,
                 "%s is an SQLite database but not a flashtune tuning database "
                 "(application_id 0x%08llx, user_version %lld, %lld schema objects)",
                 db->path, (unsigned long long)id->application_id & 0xffffffffULL,
                 id->user_version, id->objects);
        goto out;
    } else if (id->user_version == 0 && id->objects > 0) {
        ft__fail(err, rc,
                 "%s has flashtune's application id and %lld schema objects but no schema version "
                 "(user_version 0): a damaged tuning database, or one that flashtune did not make; "
                 "it is left as it is",
                 db->path, id->objects);
        goto out;
    } else if (id->user_version > 0 && id->user_version <= FT_DB_SCHEMA_VERSION && id->objects == 0) {
        ft__fail(err, rc, "%s has flashtune's schema version %lld but no tables: a damaged tuning database",
                 db->path, id->user_version);
        goto out;
    } else if (id->user_version > FT_DB_SCHEMA_VERSION || id->user_version < 0) {
        ft__fail(err, rc, "%s was written by a newer flashtune (schema %lld; this one reads up to %d)",
                 db->path, id->user_version, FT_DB_SCHEMA_VERSION);
        goto out;
    } else {
        *version = (int)id->user_version;
    }
    rc = FT_OK;
out:
    return rc;
}

/* Runs SQL text (several statements) once; the message names what failed. */
static ft_status exec_script(ft_db *db, const char *sql, const char *what, ft_err *err)
{
    ft_status rc = FT_OK;
    char *msg = NULL;

    if (sqlite3_exec(db->sq, sql, NULL, NULL, &msg) != SQLITE_OK)
        rc = sqlite_fail(db, err, what, msg != NULL ? msg : sqlite3_errmsg(db->sq));
    sqlite3_free(msg);
    return rc;
}

/* Creates the views; temp: as the connection's own, over temp.ft_current. */
static ft_status create_views(ft_db *db, int temp, ft_err *err)
{
    const char *kind = temp ? "TEMP " : "";
    const char *cur = temp ? "temp.ft_current" : "meta";
    ft_status rc = FT_OK;
    char *sql[4];
    int i;

    sql[0] = sqlite3_mprintf(view_base_fmt, kind, cur, cur, cur);
    sql[1] = sqlite3_mprintf(view_results_fmt, kind);
    sql[2] = sqlite3_mprintf(view_winners_fmt, kind);
    sql[3] = sqlite3_mprintf(view_devices_fmt, kind);
    for (i = 0; i < 4 && rc == FT_OK; i++) {
        if (sql[i] == NULL)
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory", db->path);
        else
            rc = exec_script(db, sql[i], "cannot create the views", err);
    }
    if (!temp && rc == FT_OK) /* v_misses: only in the file */
        rc = exec_script(db, view_misses_sql, "cannot create the views", err);
    for (i = 0; i < 4; i++)
        sqlite3_free(sql[i]);
    return rc;
}

/* Brings the file to FT_DB_SCHEMA_VERSION in one transaction. */
static ft_status migrate(ft_db *db, ft_err *err)
{
    ft_status rc;
    db_identity id;
    int version = 0, began = 0, code;
    char sql[128];

    rc = exec_stmt(db, ST_BEGIN_IMMEDIATE, "cannot begin the schema migration", err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    /* Again, inside the transaction: another process may have migrated it meanwhile. */
    rc = read_identity(db, &id, &code, err);
    if (rc != FT_OK)
        goto out;
    rc = classify(db, &id, &version, err);
    if (rc != FT_OK || version == FT_DB_SCHEMA_VERSION)
        goto out;
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d", FT_DB_APPLICATION_ID);
    rc = exec_script(db, sql, "cannot set the application id", err);
    if (rc != FT_OK)
        goto out;
    for (; version < FT_DB_SCHEMA_VERSION; version++) {
        char what[96];
        snprintf(what, sizeof what, "schema migration %d -> %d failed", version, version + 1);
        rc = exec_script(db, migrations[version], what, err);
        if (rc != FT_OK)
            goto out;
    }
    rc = exec_script(db, drop_views_sql, "cannot drop the old views", err);
    if (rc != FT_OK)
        goto out;
    rc = create_views(db, 0, err);
    if (rc != FT_OK)
        goto out;
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", FT_DB_SCHEMA_VERSION);
    rc = exec_script(db, sql, "cannot set the schema version", err);
out:
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

/* WAL is a property of the file, set by the first writer. The switch needs the file to
 * itself and fails at once, without the busy handler, when another process is reading or
 * switching it at the same moment (several workers starting on a new file): retry for as
 * long as the busy timeout. synchronous = NORMAL is safe with WAL (a power cut may lose the
 * last results, never corrupt the file). */
static ft_status use_wal(ft_db *db, ft_err *err)
{
    ft_status rc = FT_ERR_DATABASE;
    sqlite3_stmt *s = NULL;
    int waited = 0, src;

    for (;;) {
        src = sqlite3_prepare_v2(db->sq, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (src == SQLITE_OK)
            src = sqlite3_step(s);
        if (src == SQLITE_ROW || (src & 0xff) != SQLITE_BUSY || waited >= FT_DB_BUSY_TIMEOUT_MS)
            break;
        sqlite3_finalize(s);
        s = NULL;
        waited += sqlite3_sleep(5 + waited / 20);
    }
    if (src != SQLITE_ROW) {
        db_fail(db, err, "cannot switch to WAL");
        goto out;
    }
    /* A file system without shared memory keeps the rollback journal: slower, still safe. */
    rc = exec_script(db, "PRAGMA synchronous = NORMAL", "cannot set synchronous", err);
out:
    sqlite3_finalize(s);
    return rc;
}

/* Names SQLite gives a meaning of its own, which keep nothing or open something other than
 * the file named: "" (a temporary database), ":memory:", and "file:" URIs. A path the user
 * gives must name a file. */
static ft_status check_name(const char *path, const char *what, ft_err *err)
{
    if (path[0] == '\0')
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "%s is empty: SQLite would open a temporary database that keeps nothing", what);
    if (strcmp(path, ":memory:") == 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "%s is ':memory:', an in-memory database that keeps nothing "
                        "(./:memory: names a file of that name)", what);
    if (strncmp(path, "file:", 5) == 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "%s '%s' starts with 'file:', which SQLite reads as a URI; give the file's "
                        "path (./%s names a file of that name)", what, path, path);
    return FT_OK;
}

ft_status ft__db_default_path(char *out, size_t cap, int create_dirs, ft_err *err)
{
    ft_status rc = FT_OK;
    const char *env = getenv("FLASHTUNE_DB");
    char dir[4096];
    int n;

    if (env != NULL && env[0] != '\0') { /* empty: as if unset */
        const char *slash = strrchr(env, '/');
        rc = check_name(env, "$FLASHTUNE_DB", err);
        if (rc != FT_OK)
            goto out;
        n = snprintf(out, cap, "%s", env);
        if (n < 0 || (size_t)n >= cap) {
            rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "$FLASHTUNE_DB is too long");
            goto out;
        }
        if (create_dirs && slash != NULL && slash != env) {
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - env), env);
            rc = ft__mkdirs(dir, err);
        }
        goto out;
    }
    rc = ft__user_dir(NULL, "DATA_HOME", ".local/share", dir, sizeof dir, err);
    if (rc != FT_OK || !create_dirs)
        goto path;
    rc = ft__mkdirs(dir, err);
    if (rc != FT_OK)
        goto out;
path:
    if (rc != FT_OK)
        goto out;
    n = snprintf(out, cap, "%s/tuning.db", dir);
    if (n < 0 || (size_t)n >= cap)
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "database path too long: %s/tuning.db", dir);
out:
    return rc;
}

/* The directory a path is in ("." for a bare name). */
static void dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        snprintf(out, cap, ".");
    else if (slash == path)
        snprintf(out, cap, "/");
    else
        snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* Whether this process may create files in a directory (its effective ids, as SQLite's own
 * calls would be judged). */
static int dir_writable(const char *dir)
{
    return faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0;
}

/* What is at the path and beside it, checked before SQLite opens anything. The database must
 * be a regular file, or absent in an existing directory when it may be created; the journal,
 * WAL and shared-memory files SQLite keeps beside it must be regular files where they exist
 * (SQLite would block for ever on a FIFO, and say only "disk I/O error" of a directory). A
 * writable handle needs to write the file and its directory (the journal and the WAL are new
 * files there). real (cap bytes) gets the file the path leads to, links resolved: SQLite keeps
 * the side files beside that one. */
static ft_status check_files(const char *path, int read_only, char *real, size_t cap, ft_err *err)
{
    static const char *const side[] = {"-journal", "-wal", "-shm"};
    char name[PATH_MAX + 16], dir[PATH_MAX];
    struct stat st;
    ft_err perr;
    size_t i;
    int kind;

    kind = ft__path_kind(path, &perr);
    if (kind < 0)
        return ft__fail(err, FT_ERR_DATABASE, "tuning database %s", perr.msg);
    if (kind == 0 && read_only)
        return ft__fail(err, FT_ERR_DATABASE, "cannot open tuning database %s: no such file", path);
    if (kind == 0 || realpath(path, name) == NULL)
        snprintf(name, sizeof name, "%s", path);
    if (strlen(name) >= cap || strlen(name) >= PATH_MAX)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "tuning database path too long: %.200s...", path);
    snprintf(real, cap, "%s", name);
    dir_of(real, dir, sizeof dir);
    if (kind == 0 && stat(dir, &st) != 0) /* (a file on the way is ENOTDIR above) */
        return ft__fail(err, FT_ERR_DATABASE, "cannot create tuning database %s: directory %s: %s", path,
                        dir, strerror(errno));
    for (i = 0; i < sizeof side / sizeof side[0]; i++) {
        snprintf(name, sizeof name, "%s%s", real, side[i]);
        if (ft__path_kind(name, &perr) < 0)
            return ft__fail(err, FT_ERR_DATABASE, "tuning database %s: %s", path, perr.msg);
    }
    if (read_only && faccessat(AT_FDCWD, real, R_OK, AT_EACCESS) != 0)
        return ft__fail(err, FT_ERR_DATABASE, "cannot open tuning database %s: %s", path, strerror(errno));
    if (read_only)
        return FT_OK;
    if (!dir_writable(dir))
        return ft__fail(err, FT_ERR_DATABASE,
                        "cannot write tuning database %s: its directory %s is not writable "
                        "(SQLite keeps its journal beside the file)", path, dir);
    if (kind == 1 && faccessat(AT_FDCWD, real, R_OK | W_OK, AT_EACCESS) != 0)
        return ft__fail(err, FT_ERR_DATABASE, "cannot write tuning database %s: %s", path, strerror(errno));
    return FT_OK;
}

/* Opens (or reopens) the handle's connection to name with flags. */
static ft_status connect_db(ft_db *db, const char *name, int flags, ft_err *err)
{
    ft_status rc = FT_OK;

    if (db->sq != NULL)
        sqlite3_close(db->sq); /* no statement is prepared yet */
    db->sq = NULL;
    if (sqlite3_open_v2(name, &db->sq, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        rc = ft__fail(err, FT_ERR_DATABASE, "cannot open tuning database %s: %s", db->path,
                      db->sq != NULL ? sqlite3_errmsg(db->sq) : "out of memory");
        goto out;
    }
    sqlite3_extended_result_codes(db->sq, 1);
    sqlite3_busy_timeout(db->sq, FT_DB_BUSY_TIMEOUT_MS);
out:
    return rc;
}

/* A WAL database is read through its shared-memory index (name-shm), which a reader creates
 * when it is missing: in a directory it cannot write, the read fails ("attempt to write a
 * readonly database"). When the WAL holds nothing (no name-wal, or an empty one), the file
 * holds every committed change and is read as an immutable URI, without the index or locks;
 * when it holds changes that were never copied back into the file, they cannot be read
 * without the index, which is an error that says how to fold them in. real is the file the
 * path leads to. */
static ft_status reopen_immutable(ft_db *db, const char *real, ft_err *err)
{
    static const char hex[] = "0123456789ABCDEF";
    ft_strbuf uri = FT_STRBUF_INIT;
    char wal[PATH_MAX + 16], *text = NULL;
    struct stat st;
    ft_status rc = FT_ERR_DATABASE;
    const char *p;

    snprintf(wal, sizeof wal, "%s-wal", real);
    if (stat(wal, &st) == 0 && st.st_size > 0) {
        ft__fail(err, rc,
                 "%s: cannot read it here: %s holds changes not yet copied into the database, and "
                 "reading them needs %s-shm, which this process cannot create (the directory is not "
                 "writable); as the file's owner, sqlite3 %s 'PRAGMA wal_checkpoint(TRUNCATE)' folds "
                 "them in", db->path, wal, real, real);
        goto out;
    }
    /* file:///abs/path?mode=ro&immutable=1, every byte but unreserved ones and '/' escaped */
    ft__sb_puts(&uri, real[0] == '/' ? "file://" : "file:");
    for (p = real; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            ft__sb_append(&uri, p, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            ft__sb_append(&uri, esc, 3);
        }
    }
    ft__sb_puts(&uri, "?mode=ro&immutable=1");
    text = ft__sb_take(&uri);
    if (text == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory", db->path);
        goto out;
    }
    rc = connect_db(db, text, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, err);
out:
    free(text);
    ft__sb_free(&uri);
    return rc;
}

ft_status ft__db_open(const char *path, int read_only, ft_db **out, ft_err *err)
{
    ft_status rc = FT_ERR_OUT_OF_MEMORY;
    ft_db *db = NULL;
    char def[4096], real[PATH_MAX], dir[PATH_MAX];
    db_identity id;
    int version = 0, code = SQLITE_OK;

    if (out == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_open: out is NULL");
    *out = NULL;
    if (path == NULL) {
        rc = ft__db_default_path(def, sizeof def, !read_only, err);
        if (rc != FT_OK)
            goto out;
        path = def;
    }
    rc = check_name(path, "the tuning database path", err);
    if (rc != FT_OK)
        goto out;
    rc = check_files(path, read_only != 0, real, sizeof real, err);
    if (rc != FT_OK)
        goto out;
    dir_of(real, dir, sizeof dir);
    db = calloc(1, sizeof *db);
    if (db != NULL)
        db->path = ft__strdup(path);
    if (db == NULL || db->path == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);
        goto out;
    }
    db->read_only = read_only != 0;
    rc = connect_db(db, path, db->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                    err);
    if (rc != FT_OK)
        goto out;
    rc = read_identity(db, &id, &code, err);
    if (rc != FT_OK && db->read_only && ((code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_CANTOPEN) &&
        !dir_writable(dir)) {
        rc = reopen_immutable(db, real, err);
        if (rc == FT_OK)
            rc = read_identity(db, &id, &code, err);
    }
    if (rc != FT_OK)
        goto out;
    rc = classify(db, &id, &version, err);
    if (rc != FT_OK)
        goto out;
    /* A read-only handle reads an older schema as it is (what it lacks reads as empty:
     * ft__db_misses), so that a newer runtime library still takes the winners from it. */
    if (db->read_only && version < FT_DB_SCHEMA_OLDEST_READABLE) {
        rc = ft__fail(err, FT_ERR_DATABASE,
                      version == 0 ? "%s is not a flashtune tuning database yet (it is empty)"
                                   : "%s has an older schema; open it for writing once to migrate it",
                      path);
        goto out;
    }
    rc = exec_script(db, "PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
                     "cannot configure the connection", err);
    if (rc != FT_OK)
        goto out;
    /* The migration comes first, in the file's own journal mode: a migration that fails
     * leaves the file exactly as it was, its journal mode included. */
    if (version < FT_DB_SCHEMA_VERSION && !db->read_only) {
        rc = migrate(db, err);
        if (rc != FT_OK)
            goto out;
        version = FT_DB_SCHEMA_VERSION;
    }
    if (!db->read_only) {
        rc = use_wal(db, err);
        if (rc != FT_OK)
            goto out;
    }
    db->version = version;
    rc = exec_script(db, temp_setup_sql, "cannot set up the connection", err);
    if (rc != FT_OK)
        goto out;
    rc = create_views(db, 1, err);
    if (rc != FT_OK)
        goto out;
    *out = db;
    db = NULL;
out:
    ft__db_close(db);
    return rc;
}

void ft__db_close(ft_db *db)
{
    int i;

    if (db == NULL)
        return;
    for (i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(db->stmt[i]);
    if (db->sq != NULL && sqlite3_close(db->sq) != SQLITE_OK)
        sqlite3_close_v2(db->sq); /* only if a statement leaked: closes when it is finalized */
    free(db->path);
    free(db);
}

const char *ft__db_path(const ft_db *db)
{
    return db != NULL ? db->path : NULL;
}

/* ---- devices and kernels ----------------------------------------------------------------- */

static void bind_device(binder *b, const ft_db_device *dev)
{
    bind_text(b, ":name", dev->name, sizeof dev->name);
    bind_int(b, ":cc", dev->cc);
    bind_int(b, ":sms", dev->sms);
    bind_int(b, ":smem_per_block", dev->smem_per_block);
    bind_int(b, ":smem_per_sm", dev->smem_per_sm);
    bind_int(b, ":l2_bytes", dev->l2_bytes);
    bind_int(b, ":driver_version", dev->driver_version);
    bind_text(b, ":nvrtc_version", dev->nvrtc_version, sizeof dev->nvrtc_version);
}

/* *found = 1 and *id when the device is in the file. */
static ft_status device_find(ft_db *db, const ft_db_device *dev, long long *id, int *found,
                             ft_err *err)
{
    sqlite3_stmt *s = NULL;
    ft_status rc = get_stmt(db, ST_DEVICE_FIND, &s, err);
    binder b;
    int src;

    *found = 0;
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_device(&b, dev);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        *found = 1;
    } else if (src != SQLITE_DONE) {
        rc = db_fail(db, err, "cannot look up a device");
    }
out:
    stmt_done(s);
    return rc;
}

ft_status ft__db_device_id(ft_db *db, const ft_db_device *dev, long long *id, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int found = 0, began = 0;
    binder b;

    if (db == NULL || dev == NULL || id == NULL) {
        ft__fail(err, rc, "ft__db_device_id: NULL argument");
        goto out;
    }
    rc = device_find(db, dev, id, &found, err);
    if (rc != FT_OK || found)
        goto out;
    if (db->read_only) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: no device '%s' (cc %d, driver %d, NVRTC %s)",
                      db->path, dev->name, dev->cc, dev->driver_version, dev->nvrtc_version);
        goto out;
    }
    rc = tx_begin(db, err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    rc = device_find(db, dev, id, &found, err); /* another process may have added it */
    if (rc != FT_OK || found)
        goto out;
    rc = get_stmt(db, ST_DEVICE_INSERT, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_device(&b, dev);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    rc = step_id(db, s, id, "cannot add a device", err);
out:
    stmt_done(s);
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

static void bind_kernel_key(binder *b, const ft_db_kernel *k)
{
    bind_text(b, ":family", k->family, sizeof k->family);
    bind_text(b, ":variant", k->variant, sizeof k->variant);
    bind_text(b, ":arch", k->arch, sizeof k->arch);
    bind_text(b, ":template_hash", k->template_hash, sizeof k->template_hash);
    bind_text(b, ":source_hash", k->source_hash, sizeof k->source_hash);
    bind_text(b, ":entry", k->entry, sizeof k->entry);
    bind_text(b, ":source", k->source, (size_t)-1);
    bind_blob(b, ":cubin", k->cubin, k->cubin_size);
}

ft_status ft__db_kernel_id(ft_db *db, const ft_db_kernel *k, long long *id, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0, src;
    binder b;

    if (db == NULL || k == NULL || id == NULL) {
        ft__fail(err, rc, "ft__db_kernel_id: NULL argument");
        goto out;
    }
    if (k->source_hash[0] == '\0' || k->arch[0] == '\0') {
        ft__fail(err, rc, "ft__db_kernel_id: a kernel needs a source hash and an arch");
        goto out;
    }
    /* Found and unchanged: no write. */
    rc = get_stmt(db, ST_KERNEL_FIND, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_kernel_key(&b, k);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        if (sqlite3_column_int(s, 1) != 0 || db->read_only)
            goto out;
    } else if (src != SQLITE_DONE) {
        rc = db_fail(db, err, "cannot look up a kernel");
        goto out;
    } else if (db->read_only) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: no kernel %s for %s", db->path,
                      k->variant, k->arch);
        goto out;
    }
    stmt_done(s);
    s = NULL;

    /* New, or compiled again: the latest description wins. */
    rc = write_begin(db, ST_KERNEL_UPSERT, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_kernel_key(&b, k);
    bind_int(&b, ":registers", k->registers);
    bind_int(&b, ":spill_stores", k->spill_stores);
    bind_int(&b, ":spill_loads", k->spill_loads);
    bind_int(&b, ":smem_static", k->smem_static);
    bind_int(&b, ":smem_dynamic", k->smem_dynamic);
    bind_int(&b, ":threads", k->threads);
    bind_real(&b, ":compile_ms", k->compile_ms);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    rc = step_id(db, s, id, "cannot store a kernel", err);
out:
    stmt_done(s);
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

/* ---- current versions -------------------------------------------------------------------- */

static ft_status set_one(ft_db *db, enum stmt_id id, const char *key, const char *text,
                         long long num, ft_err *err)
{
    sqlite3_stmt *s = NULL;
    ft_status rc = get_stmt(db, id, &s, err);
    binder b;

    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":key", key, (size_t)-1);
    if (text != NULL)
        bind_text(&b, ":value", text, (size_t)-1);
    else
        bind_int(&b, ":value", num);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = db_fail(db, err, "cannot store the current versions");
out:
    stmt_done(s);
    return rc;
}

/* Into the handle's temp.ft_current and, when writable, into meta for the shell's views. */
static ft_status set_current_value(ft_db *db, const char *key, const char *text, long long num,
                                   ft_err *err)
{
    ft_status rc = set_one(db, ST_CURRENT_SET, key, text, num, err);

    if (rc == FT_OK && !db->read_only)
        rc = set_one(db, ST_META_SET, key, text, num, err);
    return rc;
}

ft_status ft__db_set_current(ft_db *db, int driver_version, const char *nvrtc_version,
                             const char *family, const char *template_hash, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    int began = 0;
    char key[256];

    if (db == NULL) {
        ft__fail(err, rc, "ft__db_set_current: NULL database");
        goto out;
    }
    rc = tx_begin(db, err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    if (driver_version != 0) {
        rc = set_current_value(db, "driver_version", NULL, driver_version, err);
        if (rc != FT_OK)
            goto out;
    }
    if (nvrtc_version != NULL && nvrtc_version[0] != '\0') {
        rc = set_current_value(db, "nvrtc_version", nvrtc_version, 0, err);
        if (rc != FT_OK)
            goto out;
    }
    if (family != NULL && family[0] != '\0' && template_hash != NULL && template_hash[0] != '\0') {
        snprintf(key, sizeof key, "template_hash/%s", family);
        rc = set_current_value(db, key, template_hash, 0, err);
    }
out:
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

/* ---- results ----------------------------------------------------------------------------- */

ft_status ft__db_record(ft_db *db, const ft_db_result *r, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    binder b;

    if (db == NULL || r == NULL) {
        ft__fail(err, rc, "ft__db_record: NULL argument");
        goto out;
    }
    if ((int)r->status < 0 || (int)r->status >= STATUS_COUNT) {
        ft__fail(err, rc, "ft__db_record: status %d is not a result status", (int)r->status);
        goto out;
    }
    rc = write_begin(db, ST_RECORD, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", r->device_id);
    bind_int(&b, ":kernel_id", r->kernel_id);
    bind_bucket(&b, &r->bucket);
    bind_shape(&b, r->batch, r->heads_q, r->heads_kv, r->seqlen_q, r->seqlen_k);
    bind_text(&b, ":status", status_names[r->status], (size_t)-1);
    bind_text(&b, ":reason", r->reason, sizeof r->reason);
    bind_real(&b, ":median_ms", r->median_ms);
    bind_real(&b, ":iqr_ms", r->iqr_ms);
    bind_real(&b, ":tflops", r->tflops);
    bind_real(&b, ":max_error", r->max_error);
    bind_int(&b, ":repetitions", r->repetitions);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = db_fail(db, err, "cannot record a result");
        goto out;
    }
    if (sqlite3_changes(db->sq) == 0)
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: cannot record a result: no device %lld or no kernel %lld",
                      db->path, r->device_id, r->kernel_id);
out:
    stmt_done(s);
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

ft_status ft__db_has_result(ft_db *db, long long device_id, long long kernel_id,
                            const ft_db_bucket *bk, int *has, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    binder b;
    int src;

    if (db == NULL || bk == NULL || has == NULL) {
        ft__fail(err, rc, "ft__db_has_result: NULL argument");
        goto out;
    }
    *has = 0;
    rc = get_stmt(db, ST_HAS_RESULT, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", device_id);
    bind_int(&b, ":kernel_id", kernel_id);
    bind_bucket(&b, bk);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW)
        *has = 1;
    else if (src != SQLITE_DONE)
        rc = db_fail(db, err, "cannot look up a result");
out:
    stmt_done(s);
    return rc;
}

ft_status ft__db_winner(ft_db *db, long long device_id, const ft_db_bucket *bk, ft_db_row *row,
                        void **cubin, size_t *cubin_size, int *found, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    void *copy = NULL;
    size_t n = 0;
    binder b;
    int src;

    if (cubin != NULL)
        *cubin = NULL;
    if (cubin_size != NULL)
        *cubin_size = 0;
    if (found != NULL)
        *found = 0;
    if (db == NULL || bk == NULL || row == NULL || found == NULL ||
        (cubin != NULL && cubin_size == NULL)) {
        ft__fail(err, rc, "ft__db_winner: NULL argument");
        goto out;
    }
    rc = get_stmt(db, ST_WINNER, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":want_cubin", cubin != NULL);
    bind_int(&b, ":device_id", device_id);
    bind_bucket(&b, bk);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_DONE)
        goto out;
    if (src != SQLITE_ROW) {
        rc = db_fail(db, err, "cannot look up a winner");
        goto out;
    }
    rc = read_row(db, s, row, err);
    if (rc != FT_OK)
        goto out;
    if (cubin != NULL) {
        const void *blob = sqlite3_column_blob(s, RC_COUNT);
        n = (size_t)sqlite3_column_bytes(s, RC_COUNT);
        if (blob != NULL && n > 0) {
            copy = malloc(n);
            if (copy == NULL) {
                rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory for a %zu-byte cubin",
                              db->path, n);
                goto out;
            }
            memcpy(copy, blob, n);
        } else {
            n = 0;
        }
        *cubin = copy;
        *cubin_size = n;
        copy = NULL;
    }
    *found = 1;
out:
    free(copy);
    stmt_done(s);
    return rc;
}

ft_status ft__db_query(ft_db *db, const ft_db_filter *f,
                       int (*fn)(void *ud, const ft_db_row *row), void *ud, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    ft_db_filter all;
    ft_db_row *row = NULL;
    binder b;

    if (db == NULL || fn == NULL) {
        ft__fail(err, rc, "ft__db_query: NULL argument");
        goto out;
    }
    if (f == NULL) {
        ft__db_filter_init(&all);
        f = &all;
    }
    rc = get_stmt(db, ST_QUERY, &s, err);
    if (rc != FT_OK)
        goto out;
    if (sqlite3_stmt_busy(s)) {
        s = NULL; /* the outer query owns it */
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_query called from its own callback");
        goto out;
    }
    row = malloc(sizeof *row);
    if (row == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    b = (binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":device_name", f->device_name, (size_t)-1);
    bind_text(&b, ":dtype", f->dtype, (size_t)-1);
    bind_int(&b, ":head_dim", f->head_dim);
    bind_int(&b, ":causal", f->causal < 0 ? -1 : f->causal != 0);
    bind_int(&b, ":winners_only", f->winners_only != 0);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    for (;;) {
        int src = sqlite3_step(s);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = db_fail(db, err, "cannot query results");
            goto out;
        }
        rc = read_row(db, s, row, err);
        if (rc != FT_OK)
            goto out;
        if (fn(ud, row) != 0)
            break;
    }
out:
    free(row);
    stmt_done(s);
    return rc;
}

ft_status ft__db_devices(ft_db *db, int (*fn)(void *ud, long long id, const ft_db_device *dev,
                                              long long results, long long winners),
                         void *ud, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;

    if (db == NULL || fn == NULL) {
        ft__fail(err, rc, "ft__db_devices: NULL argument");
        goto out;
    }
    rc = get_stmt(db, ST_DEVICES, &s, err);
    if (rc != FT_OK)
        goto out;
    if (sqlite3_stmt_busy(s)) {
        s = NULL;
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_devices called from its own callback");
        goto out;
    }
    for (;;) {
        ft_db_device dev;
        int src = sqlite3_step(s);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = db_fail(db, err, "cannot list devices");
            goto out;
        }
        memset(&dev, 0, sizeof dev);
        column_device(s, 1, &dev);
        if (fn(ud, sqlite3_column_int64(s, 0), &dev, sqlite3_column_int64(s, 9),
               sqlite3_column_int64(s, 10)) != 0)
            break;
    }
out:
    stmt_done(s);
    return rc;
}

/* ---- batches and kernel rows (packs) ----------------------------------------------------- */

ft_status ft__db_batch_begin(ft_db *db, ft_err *err)
{
    ft_status rc;

    if (db == NULL || db->batch)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_batch_begin: %s",
                        db == NULL ? "NULL database" : "a batch is already open");
    rc = tx_begin(db, err);
    if (rc == FT_OK)
        db->batch = 1;
    return rc;
}

ft_status ft__db_batch_end(ft_db *db, ft_status rc, ft_err *err)
{
    if (db == NULL || !db->batch)
        return rc != FT_OK ? rc : ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_batch_end: no batch is open");
    db->batch = 0;
    return tx_end(db, rc, err);
}

ft_status ft__db_kernel_get(ft_db *db, long long id, ft_db_kernel *k, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    char *source = NULL;
    void *cubin = NULL;
    binder b;
    int src;

    if (k != NULL)
        memset(k, 0, sizeof *k);
    if (db == NULL || k == NULL) {
        ft__fail(err, rc, "ft__db_kernel_get: NULL argument");
        goto out;
    }
    rc = get_stmt(db, ST_KERNEL_GET, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":id", id);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_DONE) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: no kernel %lld", db->path, id);
        goto out;
    }
    if (src != SQLITE_ROW) {
        rc = db_fail(db, err, "cannot read a kernel");
        goto out;
    }
    column_text(s, 0, k->family, sizeof k->family);
    column_text(s, 1, k->variant, sizeof k->variant);
    column_text(s, 2, k->arch, sizeof k->arch);
    column_text(s, 3, k->template_hash, sizeof k->template_hash);
    column_text(s, 4, k->source_hash, sizeof k->source_hash);
    column_text(s, 5, k->entry, sizeof k->entry);
    if (sqlite3_column_type(s, 6) != SQLITE_NULL) {
        const unsigned char *t = sqlite3_column_text(s, 6);
        size_t n = (size_t)sqlite3_column_bytes(s, 6);
        source = malloc(n + 1);
        if (source == NULL || t == NULL) {
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory for a kernel source", db->path);
            goto out;
        }
        memcpy(source, t, n);
        source[n] = '\0';
    }
    if (sqlite3_column_type(s, 7) != SQLITE_NULL && sqlite3_column_bytes(s, 7) > 0) {
        const void *blob = sqlite3_column_blob(s, 7);
        size_t n = (size_t)sqlite3_column_bytes(s, 7);
        cubin = malloc(n);
        if (cubin == NULL || blob == NULL) {
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory for a %zu-byte cubin", db->path, n);
            goto out;
        }
        memcpy(cubin, blob, n);
        k->cubin_size = n;
    }
    k->registers = sqlite3_column_int(s, 8);
    k->spill_stores = sqlite3_column_int64(s, 9);
    k->spill_loads = sqlite3_column_int64(s, 10);
    k->smem_static = sqlite3_column_int64(s, 11);
    k->smem_dynamic = sqlite3_column_int64(s, 12);
    k->threads = sqlite3_column_int(s, 13);
    k->compile_ms = column_real(s, 14);
    k->source = source;
    k->cubin = cubin;
    source = NULL;
    cubin = NULL;
out:
    if (rc != FT_OK && k != NULL)
        k->cubin_size = 0;
    free(source);
    free(cubin);
    stmt_done(s);
    return rc;
}

ft_status ft__db_set_measured_at(ft_db *db, const ft_db_result *r, const char *measured_at, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    binder b;

    if (db == NULL || r == NULL || measured_at == NULL) {
        ft__fail(err, rc, "ft__db_set_measured_at: NULL argument");
        goto out;
    }
    rc = write_begin(db, ST_RESULT_WHEN, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":measured_at", measured_at, (size_t)-1);
    bind_int(&b, ":device_id", r->device_id);
    bind_int(&b, ":kernel_id", r->kernel_id);
    bind_bucket(&b, &r->bucket);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = db_fail(db, err, "cannot set when a result was measured");
out:
    stmt_done(s);
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

/* ---- misses ------------------------------------------------------------------------------ */

ft_status ft__db_record_miss(ft_db *db, const ft_db_miss *m, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    binder b;

    if (db == NULL || m == NULL) {
        ft__fail(err, rc, "ft__db_record_miss: NULL argument");
        goto out;
    }
    if (db->read_only) {
        ft__fail(err, rc, "%s: misses are recorded through a writable handle", db->path);
        goto out;
    }
    rc = write_begin(db, ST_MISS_RECORD, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", m->device_id);
    bind_bucket(&b, &m->bucket);
    bind_shape(&b, m->batch, m->heads_q, m->heads_kv, m->seqlen_q, m->seqlen_k);
    bind_text(&b, ":fallback", m->fallback, sizeof m->fallback);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = db_fail(db, err, "cannot record a miss");
out:
    stmt_done(s);
    if (began)
        rc = tx_end(db, rc, err);
    return rc;
}

ft_status ft__db_misses(ft_db *db, const char *device_name, long long device_id,
                        int (*fn)(void *ud, const ft_db_miss *m), void *ud, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    ft_db_miss m;
    binder b;

    if (db == NULL || fn == NULL) {
        ft__fail(err, rc, "ft__db_misses: NULL argument");
        goto out;
    }
    rc = FT_OK;
    if (db->version < 2)
        goto out; /* read-only, older than the misses table: none */
    rc = get_stmt(db, ST_MISSES, &s, err);
    if (rc != FT_OK)
        goto out;
    if (sqlite3_stmt_busy(s)) {
        s = NULL; /* the outer listing owns it */
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_misses called from its own callback");
        goto out;
    }
    b = (binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":device_name", device_name, (size_t)-1);
    bind_int(&b, ":device_id", device_id < 0 ? -1 : device_id);
    if (b.rc != SQLITE_OK) {
        rc = bind_fail(db, &b, err);
        goto out;
    }
    for (;;) {
        int src = sqlite3_step(s);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = db_fail(db, err, "cannot list misses");
            goto out;
        }
        memset(&m, 0, sizeof m);
        m.device_id = sqlite3_column_int64(s, 0);
        column_device(s, 1, &m.device);
        column_text(s, 9, m.bucket.dtype, sizeof m.bucket.dtype);
        m.bucket.head_dim = sqlite3_column_int(s, 10);
        m.bucket.causal = sqlite3_column_int(s, 11);
        m.bucket.seqlen_bucket = sqlite3_column_int(s, 12);
        m.bucket.bh_bucket = sqlite3_column_int(s, 13);
        m.batch = sqlite3_column_int(s, 14);
        m.heads_q = sqlite3_column_int(s, 15);
        m.heads_kv = sqlite3_column_int(s, 16);
        m.seqlen_q = sqlite3_column_int(s, 17);
        m.seqlen_k = sqlite3_column_int(s, 18);
        column_text(s, 19, m.fallback, sizeof m.fallback);
        m.count = sqlite3_column_int64(s, 20);
        column_text(s, 21, m.first_seen, sizeof m.first_seen);
        column_text(s, 22, m.last_seen, sizeof m.last_seen);
        m.tuned = sqlite3_column_int(s, 23) != 0;
        if (fn(ud, &m) != 0)
            break;
    }
out:
    stmt_done(s);
    return rc;
}
