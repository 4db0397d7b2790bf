/*
 * The tuning database's inside, shared by its files (not an interface of flashtune):
 *   schema.c   the schema, its migrations and views; opening, identifying, migrating a file
 *   stmt.c     statements prepared once per handle, transactions, errors, reading a row
 *   results.c  devices, kernels, current versions, results, winners, queries, batches
 *   misses.c   the runtime's misses
 */
#ifndef FT_TUNING_DB_INTERNAL_H
#define FT_TUNING_DB_INTERNAL_H

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "tuning_db/db.h"

#define FT_DB_APPLICATION_ID 0x46544442 /* 'FTDB' */
#define FT_DB_BUSY_TIMEOUT_MS 10000

/* The statements a handle prepares once, on first use (their SQL: stmt.c). */
enum ft_db_stmt {
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
    ST_DECIDE,
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

struct ft_db {
    sqlite3 *sq;
    char *path;
    int read_only;
    int version;               /* the file's schema version (older ones are read as they are) */
    int batch;                 /* inside ft__db_batch_begin: the calls' own transactions join it */
    sqlite3_stmt *stmt[ST_COUNT];
};

/* The columns of a row (ft_db_row) that ST_WINNER and ST_QUERY select, in this order. */
enum ft_db_row_col {
    RC_RESULT_ID, RC_DEVICE_ID, RC_KERNEL_ID, RC_DEVICE, RC_CC, RC_SMS, RC_SMEM_PER_BLOCK,
    RC_SMEM_PER_SM, RC_L2_BYTES, RC_FAMILY, RC_VARIANT, RC_ARCH, RC_TEMPLATE_HASH, RC_OP, RC_KEY,
    RC_DTYPE, RC_HEAD_DIM, RC_CAUSAL, RC_SEQLEN_BUCKET, RC_BH_BUCKET, RC_BATCH, RC_HEADS_Q,
    RC_HEADS_KV, RC_SEQLEN_Q, RC_SEQLEN_K, RC_STATUS, RC_REASON, RC_MEDIAN_MS, RC_IQR_MS,
    RC_TFLOPS, RC_MAX_ERROR, RC_REPETITIONS, RC_MEASURED_AT, RC_DRIVER_VERSION, RC_NVRTC_VERSION,
    RC_PREFERRED, RC_STALE, RC_WINNER, RC_COUNT
};

/* ---- statements, transactions, errors (stmt.c) -------------------------------------------- */

/* The handle's cached statement id, prepared on first use. */
ft_status ft__db_stmt(ft_db *db, enum ft_db_stmt id, sqlite3_stmt **out, ft_err *err);
/* Ends a use of a cached statement: ready for the next one, no pointers to caller memory. */
void ft__db_stmt_done(sqlite3_stmt *s);
/* Runs a cached statement that returns no rows. */
ft_status ft__db_exec_stmt(ft_db *db, enum ft_db_stmt id, const char *what, ft_err *err);
/* Runs SQL text (several statements) once. */
ft_status ft__db_exec_script(ft_db *db, const char *sql, const char *what, ft_err *err);

/* SQLite's message for the connection's last error, naming the file and what failed; a lock
 * that outlasted the busy timeout says so. */
ft_status ft__db_fail_msg(ft_db *db, ft_err *err, const char *what, const char *msg);
ft_status ft__db_fail(ft_db *db, ft_err *err, const char *what);

/* A write transaction (BEGIN IMMEDIATE; a read-only handle only writes its temp tables); its
 * end commits when rc is FT_OK, else rolls back. Inside a batch both do nothing. */
ft_status ft__db_tx_begin(ft_db *db, ft_err *err);
ft_status ft__db_tx_end(ft_db *db, ft_status rc, ft_err *err);
/* A write: opens the transaction (*began = 1 once open, for ft__db_tx_end) and fetches the
 * statement. */
ft_status ft__db_write_begin(ft_db *db, enum ft_db_stmt id, sqlite3_stmt **s, int *began, ft_err *err);

/* Steps a statement that returns one id row (RETURNING id) to its end. */
ft_status ft__db_step_id(ft_db *db, sqlite3_stmt *s, long long *id, const char *what, ft_err *err);

/* One row of ST_WINNER or ST_QUERY. */
ft_status ft__db_read_row(ft_db *db, sqlite3_stmt *s, ft_db_row *row, ft_err *err);

/* The key of columns op and key: parsed for an operation this build has, key.op NULL for
 * another; a key text an operation of this build cannot read is FT_ERR_CORRUPT naming the
 * file. */
ft_status ft__db_column_key(ft_db *db, sqlite3_stmt *s, int op_col, int key_col, ft_key *out, ft_err *err);

/* ---- binding by parameter name; the first failure sticks -------------------------------- */

typedef struct ft_db_binder {
    sqlite3_stmt *s;
    int rc;
    const char *bad; /* the parameter that failed */
} ft_db_binder;

ft_status ft__db_bind_fail(ft_db *db, const ft_db_binder *b, ft_err *err);

static inline int ft__db_param(ft_db_binder *b, const char *name)
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

static inline void ft__db_bind_check(ft_db_binder *b, int src, const char *name)
{
    if (src != SQLITE_OK) {
        b->rc = src;
        b->bad = name;
    }
}

static inline void bind_int(ft_db_binder *b, const char *name, long long v)
{
    int i = ft__db_param(b, name);
    if (i > 0)
        ft__db_bind_check(b, sqlite3_bind_int64(b->s, i, v), name);
}

/* NaN is stored as NULL. */
static inline void bind_real(ft_db_binder *b, const char *name, double v)
{
    int i = ft__db_param(b, name);
    if (i > 0)
        ft__db_bind_check(b, isnan(v) ? sqlite3_bind_null(b->s, i) : sqlite3_bind_double(b->s, i, v), name);
}

/* A string from a fixed-size field (cap bytes, NUL-terminated within them, or cut there);
 * NULL binds NULL. The string must outlive the statement's use. */
static inline void bind_text(ft_db_binder *b, const char *name, const char *v, size_t cap)
{
    int i = ft__db_param(b, name);
    if (i <= 0)
        return;
    if (v == NULL)
        ft__db_bind_check(b, sqlite3_bind_null(b->s, i), name);
    else
        ft__db_bind_check(b, sqlite3_bind_text64(b->s, i, v, strnlen(v, cap), SQLITE_STATIC, SQLITE_UTF8), name);
}

/* A string SQLite copies (for text built on the stack). */
static inline void bind_text_copy(ft_db_binder *b, const char *name, const char *v)
{
    int i = ft__db_param(b, name);
    if (i > 0)
        ft__db_bind_check(b, sqlite3_bind_text64(b->s, i, v, strlen(v), SQLITE_TRANSIENT, SQLITE_UTF8), name);
}

static inline void bind_blob(ft_db_binder *b, const char *name, const void *v, size_t n)
{
    int i = ft__db_param(b, name);
    if (i <= 0)
        return;
    if (v == NULL || n == 0)
        ft__db_bind_check(b, sqlite3_bind_null(b->s, i), name);
    else
        ft__db_bind_check(b, sqlite3_bind_blob64(b->s, i, v, (sqlite3_uint64)n, SQLITE_STATIC), name);
}

/* The measured shape of a result or a miss. */
static inline void bind_shape(ft_db_binder *b, int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k)
{
    bind_int(b, ":batch", batch);
    bind_int(b, ":heads_q", heads_q);
    bind_int(b, ":heads_kv", heads_kv);
    bind_int(b, ":seqlen_q", seqlen_q);
    bind_int(b, ":seqlen_k", seqlen_k);
}

/* A key as the operation's name and the key's canonical text. */
static inline void bind_key(ft_db_binder *b, const ft_key *k)
{
    char text[FT_KEY_TEXT_MAX];

    ft__key_format(k, text, sizeof text);
    bind_text(b, ":op", k->op != NULL ? k->op->name : NULL, (size_t)-1);
    bind_text_copy(b, ":key", text);
}

/* ---- reading columns ---------------------------------------------------------------------- */

static inline void column_text(sqlite3_stmt *s, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    snprintf(dst, cap, "%s", t != NULL ? (const char *)t : "");
}

/* A device's fingerprint from columns first .. first + 7: name, cc, sms, smem_per_block,
 * smem_per_sm, l2_bytes, driver_version, nvrtc_version (as the device listings select them). */
static inline void column_device(sqlite3_stmt *s, int first, ft_db_device *dev)
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

/* An int column; a stored value outside int's range reads as -1 (never a valid size), so that it
 * is refused where it is checked instead of arriving wrapped. */
static inline int column_size(sqlite3_stmt *s, int col)
{
    sqlite3_int64 v = sqlite3_column_int64(s, col);
    return v < -2147483647LL || v > 2147483647LL ? -1 : (int)v;
}

static inline double column_real(sqlite3_stmt *s, int col)
{
    return sqlite3_column_type(s, col) == SQLITE_NULL ? NAN : sqlite3_column_double(s, col);
}

/* ---- the schema (schema.c) ------------------------------------------------------------------ */

/* Creates the views; temp: as the connection's own, over temp.ft_current and (a file of an
 * older schema, read as it is) over the tables as that schema has them. */
ft_status ft__db_create_views(ft_db *db, int temp, ft_err *err);

#endif
