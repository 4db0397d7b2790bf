/*
 * The tuning database: schema, migrations and queries (SQLite).
 *
 * ---- For the README: reading the tuning database with the sqlite3 shell -------------------
 *
 * The database is one SQLite file, by default ~/.local/share/flashtune/tuning.db
 * ($FLASHTUNE_DB overrides the path, $XDG_DATA_HOME the directory). It is identified by
 * `PRAGMA application_id` = 0x46544442 ('FTDB') and its schema version is
 * `PRAGMA user_version` (currently 5). It uses a WAL journal, so it may be read while a
 * tune is writing to it: `sqlite3 ~/.local/share/flashtune/tuning.db`.
 *
 * Tables (STRICT):
 *   devices   one row per GPU fingerprint: name, cc, sms, smem_per_block, smem_per_sm,
 *             l2_bytes, driver_version, nvrtc_version (unique together), first_seen.
 *   kernels   one row per compiled variant, unique by (source_hash, arch): family, variant,
 *             arch, template_hash, source_hash, entry, source (TEXT), cubin (BLOB, NULL when
 *             the variant did not compile), registers, spill_stores, spill_loads,
 *             smem_static, smem_dynamic, threads, compile_ms, created_at.
 *   results   one row per (device, kernel, operation, key): the operation (op: 'fwd') and
 *             its key (key: canonical JSON text, for the forward
 *             {"dtype":"f16","d":128,"causal":1,"group":1,"sq":4096,"seqlen":4096,"bh":64}:
 *             dtype, head dim, causality, then powers of two: query heads per K/V head, the
 *             query length, the longer sequence length (at least 64) and batch·heads_q), the
 *             shape measured (batch, heads_q, heads_kv, seqlen_q, seqlen_k), status (ok,
 *             wrong_result, compile_error, over_limits, launch_failure, fault, timeout),
 *             reason, median_ms, iqr_ms, tflops, max_error (NULL when not measured / not
 *             verified), repetitions, measured_at (UTC), and
 *             the driver_version, nvrtc_version and template_hash it was measured under,
 *             preferred (1: the winner the tuner decided on where the fastest results lay
 *             within each other's noise; any new measurement of the key clears it).
 *             Measuring again replaces the row.
 *   misses    the kinds of call the runtime library had no tuned winner for (recorded when
 *             FLASHTUNE_RECORD_MISSES=1): one row per (device, op, key) with the shape of the
 *             first call that missed (batch, heads_q, heads_kv, seqlen_q, seqlen_k), what ran
 *             instead (fallback: nearest, default), count (contexts that missed it),
 *             first_seen and last_seen (UTC). `flashtune tune --misses` tunes them.
 *   meta      key/value: created_by, and the current versions (below).
 *
 * Views:
 *   v_results  every result joined with its device and kernel, readable columns:
 *              result_id, device_id, kernel_id, device, cc, sms, smem_per_block,
 *              smem_per_sm, l2_bytes, family, variant, arch, op, key, and the key's fields
 *              dtype, head_dim, causal, group_bucket, sq_bucket, seqlen_bucket, bh_bucket (NULL
 *              where an operation's key has no such field), batch, heads_q, heads_kv, seqlen_q, seqlen_k,
 *              status, reason, median_ms, iqr_ms, tflops, max_error, repetitions,
 *              measured_at, driver_version, nvrtc_version, template_hash,
 *              stale (1: measured under other versions than the current ones),
 *              preferred (1: the tuner's decision among results within each other's noise),
 *              winner (1: of the non-stale ok results of its device, operation and key, the
 *              preferred one, else the fastest; ties go to the older row).
 *   v_winners  the rows of v_results with winner = 1: one per device, operation and key.
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
 *   SELECT device, dtype, head_dim, causal, group_bucket, sq_bucket, seqlen_bucket, bh_bucket,
 *          variant, round(median_ms, 4) AS ms, round(tflops, 1) AS tflops
 *     FROM v_winners ORDER BY device, dtype, head_dim, causal, group_bucket, sq_bucket,
 *                             seqlen_bucket, bh_bucket;
 *   SELECT status, count(*) FROM v_results GROUP BY status;
 *   SELECT variant, status, reason FROM v_results WHERE status <> 'ok';
 *   SELECT variant, median_ms, stale, winner FROM v_results
 *     WHERE dtype = 'f16' AND head_dim = 128 AND causal = 1 AND seqlen_bucket = 4096
 *       AND sq_bucket = 4096
 *     ORDER BY median_ms IS NULL, median_ms;
 *   SELECT variant, median_ms FROM v_winners WHERE op = 'fwd' AND sq_bucket <= 16;  (decode)
 *   SELECT * FROM v_devices;
 *
 * ---- end of the README part ---------------------------------------------------------------
 *
 * Schema versions: `migrations[i]` moves a database from version i to i + 1; a database
 * is brought to FT_DB_SCHEMA_VERSION in one BEGIN IMMEDIATE transaction on open, and the
 * views are recreated at the end of every migration. A new version appends a step.
 * Version 3 stores the operation and its key instead of the forward's five bucket columns;
 * the migration keeps every row and its id. Version 4 gives the forward's key the group and
 * query-length buckets: the migration rewrites the key of every forward result and miss from
 * the shape stored with it (the SQL function ft_key_of, which every connection of flashtune
 * has: ft__key_parse_shaped and ft__key_format, as the runtime computes keys). Version 5 adds results.preferred
 * and the two triggers that clear it when its key is measured again. A read-only handle reads a
 * file of version 1 to 4 as it is, through views of its own that give the old rows the
 * operation 'fwd', the key of the current form and preferred = 0.
 *
 * This file: the schema and opening a file. stmt.c: statements and rows; results.c:
 * devices, kernels, results, queries; misses.c: misses (internal.h says what they share).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/strbuf.h"
#include "tuning_db/internal.h"

/* ---- schema --------------------------------------------------------------------------- */

/* The forward's key from the bucket columns of schemas 1 and 2 (the form of schema 3). */
#define FWD_KEY_OF_COLUMNS \
    "json_object('dtype', dtype, 'd', head_dim, 'causal', causal, 'seqlen', seqlen_bucket, 'bh', bh_bucket)"
/* A key of an older form (such as FWD_KEY_OF_COLUMNS's) in the current form, completed from the
 * shape of the row (ft_key_of, registered on every connection: connect_db). */
#define KEY_OF_SHAPE(op, key) "ft_key_of(" op ", " key ", batch, heads_q, heads_kv, seqlen_q, seqlen_k)"
#define FWD_KEY_OF_ROW KEY_OF_SHAPE("op", "key")


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
    /* 2 -> 3: operations and keys. results and misses keep every row and id; the forward's
     * five bucket columns become its key, in the canonical text (ft__key_format, json_object's
     * output for the same fields in the same order). */
    "DROP VIEW IF EXISTS v_misses;\n"
    "DROP VIEW IF EXISTS v_devices;\n"
    "DROP VIEW IF EXISTS v_winners;\n"
    "DROP VIEW IF EXISTS v_results;\n"
    "DROP VIEW IF EXISTS v_results_base;\n"
    "CREATE TABLE results_v3 (\n"
    "  id             INTEGER PRIMARY KEY,\n"
    "  device_id      INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,\n"
    "  kernel_id      INTEGER NOT NULL REFERENCES kernels (id) ON DELETE CASCADE,\n"
    "  op             TEXT NOT NULL,\n"
    "  key            TEXT NOT NULL,\n"
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
    "  UNIQUE (device_id, kernel_id, op, key)\n"
    ") STRICT;\n"
    "INSERT INTO results_v3 (id, device_id, kernel_id, op, key, batch, heads_q, heads_kv, seqlen_q,\n"
    "  seqlen_k, status, reason, median_ms, iqr_ms, tflops, max_error, repetitions, driver_version,\n"
    "  nvrtc_version, template_hash, measured_at)\n"
    "SELECT id, device_id, kernel_id, 'fwd', " FWD_KEY_OF_COLUMNS ", batch, heads_q, heads_kv,\n"
    "  seqlen_q, seqlen_k, status, reason, median_ms, iqr_ms, tflops, max_error, repetitions,\n"
    "  driver_version, nvrtc_version, template_hash, measured_at FROM results;\n"
    "DROP TABLE results;\n"
    "ALTER TABLE results_v3 RENAME TO results;\n"
    "CREATE INDEX results_key ON results (device_id, op, key, median_ms);\n"
    "CREATE INDEX results_kernel ON results (kernel_id);\n"
    "CREATE TABLE misses_v3 (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  device_id     INTEGER NOT NULL REFERENCES devices (id) ON DELETE CASCADE,\n"
    "  op            TEXT NOT NULL,\n"
    "  key           TEXT NOT NULL,\n"
    "  batch         INTEGER NOT NULL,\n"
    "  heads_q       INTEGER NOT NULL,\n"
    "  heads_kv      INTEGER NOT NULL,\n"
    "  seqlen_q      INTEGER NOT NULL,\n"
    "  seqlen_k      INTEGER NOT NULL,\n"
    "  fallback      TEXT NOT NULL,\n"
    "  count         INTEGER NOT NULL DEFAULT 1,\n"
    "  first_seen    TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  last_seen     TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,\n"
    "  UNIQUE (device_id, op, key)\n"
    ") STRICT;\n"
    "INSERT INTO misses_v3 (id, device_id, op, key, batch, heads_q, heads_kv, seqlen_q, seqlen_k,\n"
    "  fallback, count, first_seen, last_seen)\n"
    "SELECT id, device_id, 'fwd', " FWD_KEY_OF_COLUMNS ", batch, heads_q, heads_kv, seqlen_q,\n"
    "  seqlen_k, fallback, count, first_seen, last_seen FROM misses;\n"
    "DROP TABLE misses;\n"
    "ALTER TABLE misses_v3 RENAME TO misses;\n",
    /* 3 -> 4: the forward's key gains "group" and "sq", from the shape each row keeps. A new key
     * is never an old one (it has more fields), and it holds the old key's fields with the old
     * values, so no two rows of one device (and kernel) can end with one key. */
    "UPDATE results SET key = " FWD_KEY_OF_ROW " WHERE op = 'fwd';\n"
    "UPDATE misses SET key = " FWD_KEY_OF_ROW " WHERE op = 'fwd';\n",
    /* 4 -> 5: a key's winner may be decided (preferred = 1) where its fastest results lie within
     * each other's noise; any new measurement of the key undoes the decision (the triggers, so
     * that every writer of results keeps it: the tuner, imports, the sqlite3 shell). */
    "ALTER TABLE results ADD COLUMN preferred INTEGER NOT NULL DEFAULT 0 CHECK (preferred IN (0, 1));\n"
    "CREATE TRIGGER results_measured AFTER INSERT ON results BEGIN\n"
    "  UPDATE results SET preferred = 0\n"
    "   WHERE device_id = NEW.device_id AND op = NEW.op AND key = NEW.key AND preferred = 1;\n"
    "END;\n"
    "CREATE TRIGGER results_remeasured\n"
    "  AFTER UPDATE OF status, median_ms, template_hash, driver_version, nvrtc_version ON results BEGIN\n"
    "  UPDATE results SET preferred = 0\n"
    "   WHERE device_id = NEW.device_id AND op = NEW.op AND key = NEW.key AND preferred = 1;\n"
    "END;\n",
};

_Static_assert(sizeof migrations / sizeof migrations[0] == FT_DB_SCHEMA_VERSION,
               "one migration step per schema version");

/* The views, made twice from the same text: in the file (the current versions from `meta`,
 * for the sqlite3 shell) and as TEMP views of each connection (the current versions from
 * the connection's temp.ft_current, which ft__db_set_current fills). The first %s is ""
 * or "TEMP ", then the table holding the current versions (three times), where the results come
 * from (RESULTS_V3, or RESULTS_OLD for a file of schema 1 or 2, RESULTS_OLD3 for one of
 * schema 3 and RESULTS_OLD4 for one of schema 4 that a read-only handle reads as it is) and the schema prefix of the tables ("main."
 * for TEMP views; the file's own views may not name a schema). The key's fields are columns of their own, NULL where an operation's key
 * has no such field. */
#define RESULTS_V3 "results"
#define RESULTS_OLD \
    "(SELECT *, 'fwd' AS op, " KEY_OF_SHAPE("'fwd'", FWD_KEY_OF_COLUMNS) " AS key, 0 AS preferred FROM main.results)"
#define RESULTS_OLD3                                                                                      \
    "(SELECT id, device_id, kernel_id, op, iif(op = 'fwd', " FWD_KEY_OF_ROW ", key) AS key, batch, heads_q, " \
    "heads_kv, seqlen_q, seqlen_k, status, reason, median_ms, iqr_ms, tflops, max_error, repetitions, "     \
    "driver_version, nvrtc_version, template_hash, measured_at, 0 AS preferred FROM main.results)"
#define RESULTS_OLD4 "(SELECT *, 0 AS preferred FROM main.results)"

static const char view_base_fmt[] =
    "CREATE %sVIEW v_results_base AS\n"
    "SELECT r.id AS result_id, r.device_id, r.kernel_id, d.name AS device, d.cc, d.sms,\n"
    "       d.smem_per_block, d.smem_per_sm, d.l2_bytes, k.family, k.variant, k.arch,\n"
    "       r.op, r.key, json_extract(r.key, '$.dtype') AS dtype,\n"
    "       json_extract(r.key, '$.d') AS head_dim, json_extract(r.key, '$.causal') AS causal,\n"
    "       json_extract(r.key, '$.group') AS group_bucket, json_extract(r.key, '$.sq') AS sq_bucket,\n"
    "       json_extract(r.key, '$.seqlen') AS seqlen_bucket, json_extract(r.key, '$.bh') AS bh_bucket,\n"
    "       r.batch, r.heads_q, r.heads_kv, r.seqlen_q, r.seqlen_k, r.status, r.reason,\n"
    "       r.median_ms, r.iqr_ms, r.tflops, r.max_error, r.repetitions, r.measured_at,\n"
    "       r.driver_version, r.nvrtc_version, r.template_hash, r.preferred,\n"
    "       (coalesce((SELECT value FROM %s WHERE key = 'driver_version'),\n"
    "                 r.driver_version) <> r.driver_version\n"
    "        OR coalesce((SELECT value FROM %s WHERE key = 'nvrtc_version'),\n"
    "                    r.nvrtc_version) <> r.nvrtc_version\n"
    "        OR coalesce((SELECT value FROM %s WHERE key = 'template_hash/' || k.family),\n"
    "                    r.template_hash) <> r.template_hash) AS stale\n"
    "FROM %s r\n"
    "JOIN %sdevices d ON d.id = r.device_id\n"
    "JOIN %skernels k ON k.id = r.kernel_id;\n";

/* What makes a result a candidate for its key's winner (in v_results_base's columns). */
#define WINNER_COND "status = 'ok' AND stale = 0 AND median_ms IS NOT NULL"

/* A miss's key has a winner for its device now (from view, v_results_base in some schema). */
#define MISS_TUNED(view)                                                                          \
    "EXISTS (SELECT 1 FROM " view " r WHERE r.device_id = m.device_id AND r.op = m.op "           \
    "AND r.key = m.key AND " WINNER_COND ") AS tuned"

static const char view_results_fmt[] =
    "CREATE %sVIEW v_results AS\n"
    "SELECT *,\n"
    "       CASE WHEN " WINNER_COND "\n"
    "            THEN row_number() OVER (\n"
    "                   PARTITION BY device_id, op, key, " WINNER_COND "\n"
    "                   ORDER BY preferred DESC, median_ms, result_id) = 1\n"
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
    "FROM %sdevices d\n"
    "LEFT JOIN (SELECT device_id, count(*) AS n FROM %s GROUP BY device_id) r\n"
    "  ON r.device_id = d.id\n"
    "LEFT JOIN (SELECT device_id, count(*) AS n FROM v_winners GROUP BY device_id) w\n"
    "  ON w.device_id = d.id;\n";

/* The misses with the key's fields as columns: the file's view (schema 4) and the
 * connection's own over the misses of schema 2 or later (temp.ft_misses; schema 1 has none). */
#define MISS_COLUMNS                                                                              \
    "m.id AS miss_id, m.device_id, m.op, m.key, json_extract(m.key, '$.dtype') AS dtype,\n"     \
    "       json_extract(m.key, '$.d') AS head_dim, json_extract(m.key, '$.causal') AS causal,\n"   \
    "       json_extract(m.key, '$.group') AS group_bucket, json_extract(m.key, '$.sq') AS sq_bucket,\n" \
    "       json_extract(m.key, '$.seqlen') AS seqlen_bucket, json_extract(m.key, '$.bh') AS bh_bucket,\n" \
    "       m.batch, m.heads_q, m.heads_kv, m.seqlen_q, m.seqlen_k, m.fallback, m.count,\n"        \
    "       m.first_seen, m.last_seen"

static const char view_misses_sql[] =
    "CREATE VIEW v_misses AS\n"
    "SELECT " MISS_COLUMNS ", d.name AS device,\n"
    "       " MISS_TUNED("v_results_base") "\n"
    "FROM misses m\n"
    "JOIN devices d ON d.id = m.device_id;\n";

static const char temp_misses_fmt[] =
    "CREATE TEMP VIEW ft_misses AS\n"
    "SELECT " MISS_COLUMNS "\n"
    "FROM %s m;\n";
#define MISSES_OLD "(SELECT *, 'fwd' AS op, " KEY_OF_SHAPE("'fwd'", FWD_KEY_OF_COLUMNS) " AS key FROM main.misses)"
#define MISSES_OLD3                                                                                          \
    "(SELECT id, device_id, op, iif(op = 'fwd', " FWD_KEY_OF_ROW ", key) AS key, batch, heads_q, heads_kv, " \
    "seqlen_q, seqlen_k, fallback, count, first_seen, last_seen FROM main.misses)"

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
            ft__db_fail(db, err, "cannot read the database header");
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

ft_status ft__db_create_views(ft_db *db, int temp, ft_err *err)
{
    const char *kind = temp ? "TEMP " : "";
    const char *cur = temp ? "temp.ft_current" : "meta";
    const char *schema = temp ? "main." : "";
    const int old = temp && db->version < FT_DB_SCHEMA_VERSION;
    const char *results = !old            ? (temp ? "main." RESULTS_V3 : RESULTS_V3)
                          : db->version < 3 ? RESULTS_OLD
                          : db->version < 4 ? RESULTS_OLD3
                                            : RESULTS_OLD4;
    const char *misses = !old || db->version >= 4 ? "main.misses" : db->version < 3 ? MISSES_OLD : MISSES_OLD3;
    ft_status rc = FT_OK;
    char *sql[5] = {NULL, NULL, NULL, NULL, NULL};
    int i;

    sql[0] = sqlite3_mprintf(view_base_fmt, kind, cur, cur, cur, results, schema, schema);
    sql[1] = sqlite3_mprintf(view_results_fmt, kind);
    sql[2] = sqlite3_mprintf(view_winners_fmt, kind);
    sql[3] = sqlite3_mprintf(view_devices_fmt, kind, schema, results);
    if (temp && db->version >= 2)
        sql[4] = sqlite3_mprintf(temp_misses_fmt, misses);
    for (i = 0; i < 5 && rc == FT_OK; i++) {
        if (sql[i] == NULL && (i < 4 || (temp && db->version >= 2)))
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory", db->path);
        else if (sql[i] != NULL)
            rc = ft__db_exec_script(db, sql[i], "cannot create the views", err);
    }
    if (!temp && rc == FT_OK) /* v_misses: only in the file */
        rc = ft__db_exec_script(db, view_misses_sql, "cannot create the views", err);
    for (i = 0; i < 5; i++)
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

    rc = ft__db_exec_stmt(db, ST_BEGIN_IMMEDIATE, "cannot begin the schema migration", err);
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
    rc = ft__db_exec_script(db, sql, "cannot set the application id", err);
    if (rc != FT_OK)
        goto out;
    for (; version < FT_DB_SCHEMA_VERSION; version++) {
        char what[96];
        snprintf(what, sizeof what, "schema migration %d -> %d failed", version, version + 1);
        rc = ft__db_exec_script(db, migrations[version], what, err);
        if (rc != FT_OK)
            goto out;
    }
    rc = ft__db_exec_script(db, drop_views_sql, "cannot drop the old views", err);
    if (rc != FT_OK)
        goto out;
    rc = ft__db_create_views(db, 0, err);
    if (rc != FT_OK)
        goto out;
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", FT_DB_SCHEMA_VERSION);
    rc = ft__db_exec_script(db, sql, "cannot set the schema version", err);
out:
    if (began)
        rc = ft__db_tx_end(db, rc, err);
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
        ft__db_fail(db, err, "cannot switch to WAL");
        goto out;
    }
    /* A file system without shared memory keeps the rollback journal: slower, still safe. */
    rc = ft__db_exec_script(db, "PRAGMA synchronous = NORMAL", "cannot set synchronous", err);
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
        return ft__fail(err, FT_ERR_DATABASE,
                        "cannot open tuning database %s: no such file (`flashtune tune` makes one, `flashtune "
                        "import` brings one from a pack)",
                        path);
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

/* ft_key_of(op, key, batch, heads_q, heads_kv, seqlen_q, seqlen_k): the key text of operation op
 * stored with the shape it was measured on, in the current form of the operation's key: a text
 * of an older form gets the fields it lacks from the shape (ft__key_parse_shaped), the others
 * keep their values. A text of the current form, of an operation this build does not have, or
 * one that is not a key of its operation comes back as it is. */
static void sql_key_of(sqlite3_context *c, int argc, sqlite3_value **argv)
{
    const unsigned char *op_name = sqlite3_value_text(argv[0]), *text = sqlite3_value_text(argv[1]);
    const ft_op *op = op_name != NULL ? ft__op_find((const char *)op_name) : NULL;
    int shape[5], i;
    char out[FT_KEY_TEXT_MAX];
    ft_key k;
    ft_err err;

    (void)argc;
    for (i = 0; i < 5; i++)
        shape[i] = sqlite3_value_int(argv[2 + i]);
    if (op == NULL || text == NULL ||
        ft__key_parse_shaped(op, (const char *)text, shape[0], shape[1], shape[2], shape[3], shape[4], &k, &err) !=
            FT_OK) {
        sqlite3_result_value(c, argv[1]);
        return;
    }
    ft__key_format(&k, out, sizeof out);
    sqlite3_result_text(c, out, -1, SQLITE_TRANSIENT);
}

/* Opens (or reopens) the handle's connection to name with flags, with flashtune's SQL functions. */
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
    if (sqlite3_create_function_v2(db->sq, "ft_key_of", 7, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_key_of, NULL,
                                   NULL, NULL) != SQLITE_OK)
        rc = ft__fail(err, FT_ERR_DATABASE, "cannot open tuning database %s: %s", db->path, sqlite3_errmsg(db->sq));
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
    rc = ft__db_exec_script(db, "PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
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
    rc = ft__db_exec_script(db, temp_setup_sql, "cannot set up the connection", err);
    if (rc != FT_OK)
        goto out;
    rc = ft__db_create_views(db, 1, err);
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

