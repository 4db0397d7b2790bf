/*
 * The tuning database's statements, prepared once per handle and reused (bind, step, reset),
 * transactions, errors, reading a row, statuses and buckets.
 */
#include <stdlib.h>

#include "ops/op.h"
#include "tuning_db/internal.h"

/* ---- statements, prepared once per handle ---------------------------------------------- */

/* What makes a result a candidate for its key's winner, and a miss whose key has one now (the
 * same text as the views', schema.c). */
#define WINNER_COND "status = 'ok' AND stale = 0 AND median_ms IS NOT NULL"
#define MISS_TUNED_TEMP                                                                              \
    "EXISTS (SELECT 1 FROM temp.v_results_base r WHERE r.device_id = m.device_id AND r.op = m.op " \
    "AND r.key = m.key AND " WINNER_COND ") AS tuned"

/* The columns of a row (ft_db_row), in the order of enum ft_db_row_col (internal.h). */
#define ROW_COLUMNS                                                                          \
    "result_id, device_id, kernel_id, device, cc, sms, smem_per_block, smem_per_sm, "        \
    "l2_bytes, family, variant, arch, template_hash, op, key, dtype, head_dim, causal, seqlen_bucket, " \
    "bh_bucket, batch, heads_q, heads_kv, seqlen_q, seqlen_k, status, reason, median_ms, "   \
    "iqr_ms, tflops, max_error, repetitions, measured_at, driver_version, nvrtc_version, "   \
    "preferred, stale, winner"


static const char *const row_col_names[RC_COUNT] = {
    "result_id", "device_id", "kernel_id", "device", "cc", "sms", "smem_per_block",
    "smem_per_sm", "l2_bytes", "family", "variant", "arch", "template_hash", "op", "key", "dtype",
    "head_dim", "causal", "seqlen_bucket", "bh_bucket", "batch", "heads_q", "heads_kv",
    "seqlen_q", "seqlen_k", "status", "reason", "median_ms", "iqr_ms", "tflops",
    "max_error", "repetitions", "measured_at", "driver_version", "nvrtc_version", "preferred", "stale",
    "winner",
};

#define BUCKET_MATCH "op = :op AND key = :key"

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
        "INSERT INTO main.results (device_id, kernel_id, op, key, batch, heads_q, heads_kv, "
        "seqlen_q, seqlen_k, status, reason, median_ms, iqr_ms, tflops, max_error, repetitions, "
        "driver_version, nvrtc_version, template_hash) "
        "SELECT d.id, k.id, :op, :key, :batch, :heads_q, :heads_kv, :seqlen_q, :seqlen_k, :status, "
        ":reason, :median_ms, :iqr_ms, :tflops, :max_error, :repetitions, d.driver_version, "
        "d.nvrtc_version, k.template_hash "
        "FROM main.devices d, main.kernels k WHERE d.id = :device_id AND k.id = :kernel_id "
        "ON CONFLICT (device_id, kernel_id, op, key) "
        "DO UPDATE SET batch = excluded.batch, heads_q = excluded.heads_q, "
        "heads_kv = excluded.heads_kv, seqlen_q = excluded.seqlen_q, "
        "seqlen_k = excluded.seqlen_k, status = excluded.status, reason = excluded.reason, "
        "median_ms = excluded.median_ms, iqr_ms = excluded.iqr_ms, tflops = excluded.tflops, "
        "max_error = excluded.max_error, repetitions = excluded.repetitions, "
        "driver_version = excluded.driver_version, nvrtc_version = excluded.nvrtc_version, "
        "template_hash = excluded.template_hash, measured_at = CURRENT_TIMESTAMP",
    /* The key's decided winner: preferred on the kernel's ok result, cleared on the others. */
    [ST_DECIDE] =
        "UPDATE main.results SET preferred = (kernel_id = :kernel_id AND status = 'ok') "
        "WHERE device_id = :device_id AND " BUCKET_MATCH " AND (preferred = 1 OR kernel_id = :kernel_id)",
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
        "AND (:op IS NULL OR op = :op) "
        "AND (:dtype IS NULL OR dtype = :dtype) "
        "AND (:head_dim < 0 OR head_dim = :head_dim) "
        "AND (:causal < 0 OR causal = :causal) "
        "AND (:winners_only = 0 OR winner = 1) "
        "ORDER BY device, device_id, op, dtype, head_dim, causal, group_bucket, sq_bucket, seqlen_bucket, bh_bucket, "
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
        "INSERT INTO main.misses (device_id, op, key, batch, heads_q, heads_kv, seqlen_q, seqlen_k, "
        "fallback) VALUES (:device_id, :op, :key, :batch, :heads_q, :heads_kv, :seqlen_q, :seqlen_k, "
        ":fallback) "
        "ON CONFLICT (device_id, op, key) DO UPDATE SET "
        "count = count + 1, last_seen = CURRENT_TIMESTAMP, fallback = excluded.fallback",
    /* tuned: the key has a winner (a non-stale ok result) for the device now. */
    [ST_MISSES] =
        "SELECT m.device_id, d.name, d.cc, d.sms, d.smem_per_block, d.smem_per_sm, d.l2_bytes, "
        "d.driver_version, d.nvrtc_version, m.op, m.key, m.batch, m.heads_q, m.heads_kv, "
        "m.seqlen_q, m.seqlen_k, m.fallback, m.count, "
        "m.first_seen, m.last_seen, "
        MISS_TUNED_TEMP " "
        "FROM temp.ft_misses m JOIN main.devices d ON d.id = m.device_id "
        "WHERE (:device_name IS NULL OR instr(lower(d.name), lower(:device_name)) > 0) "
        "AND (:device_id < 0 OR m.device_id = :device_id) "
        "ORDER BY d.name, m.device_id, m.op, m.dtype, m.head_dim, m.causal, m.group_bucket, m.sq_bucket, "
        "m.seqlen_bucket, m.bh_bucket",
};

/* ---- helpers ------------------------------------------------------------------------------ */

/* Runs SQL text (several statements) once; the message names what failed. */
ft_status ft__db_exec_script(ft_db *db, const char *sql, const char *what, ft_err *err)
{
    ft_status rc = FT_OK;
    char *msg = NULL;

    if (sqlite3_exec(db->sq, sql, NULL, NULL, &msg) != SQLITE_OK)
        rc = ft__db_fail_msg(db, err, what, msg != NULL ? msg : sqlite3_errmsg(db->sq));
    sqlite3_free(msg);
    return rc;
}


/* SQLite's message for the connection's last error; a lock that outlasted the busy timeout
 * says so (SQLite's own text, "database is locked", does not say who or for how long). */
ft_status ft__db_fail_msg(ft_db *db, ft_err *err, const char *what, const char *msg)
{
    int code = sqlite3_extended_errcode(db->sq) & 0xff;

    if (code == SQLITE_BUSY)
        return ft__fail(err, FT_ERR_DATABASE,
                        "%s: %s: another process holds a lock on the database (gave up after %d s)",
                        db->path, what, FT_DB_BUSY_TIMEOUT_MS / 1000);
    return ft__fail(err, FT_ERR_DATABASE, "%s: %s: %s", db->path, what, msg);
}

ft_status ft__db_fail(ft_db *db, ft_err *err, const char *what)
{
    return ft__db_fail_msg(db, err, what, sqlite3_errmsg(db->sq));
}

/* Ends a use of a cached statement: ready for the next one, no pointers to caller memory. */
void ft__db_stmt_done(sqlite3_stmt *s)
{
    if (s != NULL) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

/* Runs a cached statement that returns no rows. */
ft_status ft__db_exec_stmt(ft_db *db, enum ft_db_stmt id, const char *what, ft_err *err)
{
    sqlite3_stmt *s = NULL;
    ft_status rc = ft__db_stmt(db, id, &s, err);

    if (rc != FT_OK)
        goto out;
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = ft__db_fail(db, err, what);
out:
    ft__db_stmt_done(s);
    return rc;
}

/* A write transaction (BEGIN IMMEDIATE; a read-only handle only writes its temp tables). */
ft_status ft__db_tx_begin(ft_db *db, ft_err *err)
{
    if (db->batch)
        return FT_OK; /* part of the batch's transaction */
    return ft__db_exec_stmt(db, db->read_only ? ST_BEGIN : ST_BEGIN_IMMEDIATE,
                     "cannot begin a transaction", err);
}

/* Commits when rc is FT_OK, else rolls back; returns rc or the commit's failure. Inside a
 * batch it does neither: ft__db_batch_end decides for the whole batch. */
ft_status ft__db_tx_end(ft_db *db, ft_status rc, ft_err *err)
{
    if (db->batch)
        return rc;
    if (rc == FT_OK)
        rc = ft__db_exec_stmt(db, ST_COMMIT, "cannot commit", err);
    if (rc != FT_OK && !sqlite3_get_autocommit(db->sq))
        ft__db_exec_stmt(db, ST_ROLLBACK, "cannot roll back", NULL);
    return rc;
}

/* A write: opens the transaction (*began = 1 once open, for tx_end) and fetches the statement. */
ft_status ft__db_write_begin(ft_db *db, enum ft_db_stmt id, sqlite3_stmt **s, int *began, ft_err *err)
{
    ft_status rc = ft__db_tx_begin(db, err);

    if (rc != FT_OK)
        return rc;
    *began = 1;
    return ft__db_stmt(db, id, s, err);
}

ft_status ft__db_bind_fail(ft_db *db, const ft_db_binder *b, ft_err *err)
{
    if (b->rc == SQLITE_RANGE)
        return ft__fail(err, FT_ERR_INTERNAL, "%s: no parameter %s in a statement", db->path,
                        b->bad != NULL ? b->bad : "?");
    return ft__fail(err, FT_ERR_DATABASE, "%s: cannot bind %s: %s", db->path,
                    b->bad != NULL ? b->bad : "?", sqlite3_errstr(b->rc));
}

/* Steps a statement that returns one id row (RETURNING id) to its end. */
ft_status ft__db_step_id(ft_db *db, sqlite3_stmt *s, long long *id, const char *what, ft_err *err)
{
    ft_status rc = FT_ERR_DATABASE;
    int src = sqlite3_step(s);

    if (src != SQLITE_ROW) {
        if (src == SQLITE_DONE)
            ft__fail(err, FT_ERR_INTERNAL, "%s: %s: no row returned", db->path, what);
        else
            ft__db_fail(db, err, what);
        goto out;
    }
    *id = sqlite3_column_int64(s, 0);
    if (sqlite3_step(s) != SQLITE_DONE) {
        ft__db_fail(db, err, what);
        goto out;
    }
    rc = FT_OK;
out:
    return rc;
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

ft_status ft__db_stmt(ft_db *db, enum ft_db_stmt id, sqlite3_stmt **out, ft_err *err)
{
    ft_status rc = FT_OK;

    *out = NULL;
    if (db->stmt[id] == NULL) {
        int src = sqlite3_prepare_v3(db->sq, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                     &db->stmt[id], NULL);
        if (src != SQLITE_OK) {
            rc = ft__db_fail(db, err, "cannot prepare a statement");
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

ft_status ft__db_column_key(ft_db *db, sqlite3_stmt *s, int op_col, int key_col, ft_key *out, ft_err *err)
{
    char op_name[32], text[FT_KEY_TEXT_MAX * 2];
    const ft_op *op;
    ft_status rc;

    memset(out, 0, sizeof *out);
    column_text(s, op_col, op_name, sizeof op_name);
    column_text(s, key_col, text, sizeof text);
    op = ft__op_find(op_name);
    if (op == NULL)
        return FT_OK; /* a newer flashtune's operation: listed, never chosen */
    rc = ft__key_parse(op, text, out, err);
    if (rc != FT_OK)
        ft__err_prefix(err, "%s", db->path);
    return rc;
}

ft_status ft__db_read_row(ft_db *db, sqlite3_stmt *s, ft_db_row *row, ft_err *err)
{
    ft_status rc = FT_OK;
    ft_db_result *r = &row->result;
    char status[32];

    memset(row, 0, sizeof *row);
    r->device_id = sqlite3_column_int64(s, RC_DEVICE_ID);
    r->kernel_id = sqlite3_column_int64(s, RC_KERNEL_ID);
    rc = ft__db_column_key(db, s, RC_OP, RC_KEY, &r->key, err);
    if (rc != FT_OK)
        goto out;
    r->batch = column_size(s, RC_BATCH);
    r->heads_q = column_size(s, RC_HEADS_Q);
    r->heads_kv = column_size(s, RC_HEADS_KV);
    r->seqlen_q = column_size(s, RC_SEQLEN_Q);
    r->seqlen_k = column_size(s, RC_SEQLEN_K);
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
    row->preferred = sqlite3_column_int(s, RC_PREFERRED) != 0;
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

int ft__db_device_same_model(const ft_db_device *a, const ft_db_device *b)
{
    return strcmp(a->name, b->name) == 0 && a->cc == b->cc && a->sms == b->sms &&
           a->smem_per_block == b->smem_per_block && a->smem_per_sm == b->smem_per_sm && a->l2_bytes == b->l2_bytes;
}

int ft__db_device_same_driver(const ft_db_device *a, const ft_db_device *b)
{
    return a->driver_version == b->driver_version && strcmp(a->nvrtc_version, b->nvrtc_version) == 0;
}

void ft__db_filter_init(ft_db_filter *f)
{
    f->device_name = NULL;
    f->op = NULL;
    f->dtype = NULL;
    f->head_dim = -1;
    f->causal = -1;
    f->winners_only = 0;
}

