/*
 * The tuning database's misses: the kinds of call the runtime library had no tuned winner for.
 */
#include "tuning_db/internal.h"

/* ---- misses ------------------------------------------------------------------------------ */

ft_status ft__db_record_miss(ft_db *db, const ft_db_miss *m, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    ft_db_binder b;

    if (db == NULL || m == NULL || m->key.op == NULL) {
        ft__fail(err, rc, "ft__db_record_miss: NULL argument or a key without its operation");
        goto out;
    }
    if (db->read_only) {
        ft__fail(err, rc, "%s: misses are recorded through a writable handle", db->path);
        goto out;
    }
    rc = ft__db_write_begin(db, ST_MISS_RECORD, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", m->device_id);
    bind_key(&b, &m->key);
    bind_shape(&b, m->batch, m->heads_q, m->heads_kv, m->seqlen_q, m->seqlen_k);
    bind_text(&b, ":fallback", m->fallback, sizeof m->fallback);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = ft__db_fail(db, err, "cannot record a miss");
out:
    ft__db_stmt_done(s);
    if (began)
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

ft_status ft__db_misses(ft_db *db, const char *device_name, long long device_id,
                        int (*fn)(void *ud, const ft_db_miss *m), void *ud, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    ft_db_miss m;
    ft_db_binder b;

    if (db == NULL || fn == NULL) {
        ft__fail(err, rc, "ft__db_misses: NULL argument");
        goto out;
    }
    rc = FT_OK;
    if (db->version < 2)
        goto out; /* read-only, older than the misses table: none */
    rc = ft__db_stmt(db, ST_MISSES, &s, err);
    if (rc != FT_OK)
        goto out;
    if (sqlite3_stmt_busy(s)) {
        s = NULL; /* the outer listing owns it */
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_misses called from its own callback");
        goto out;
    }
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":device_name", device_name, (size_t)-1);
    bind_int(&b, ":device_id", device_id < 0 ? -1 : device_id);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    for (;;) {
        int src = sqlite3_step(s);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = ft__db_fail(db, err, "cannot list misses");
            goto out;
        }
        memset(&m, 0, sizeof m);
        m.device_id = sqlite3_column_int64(s, 0);
        column_device(s, 1, &m.device);
        rc = ft__db_column_key(db, s, 9, 10, &m.key, err);
        if (rc != FT_OK)
            goto out;
        m.batch = column_size(s, 11);
        m.heads_q = column_size(s, 12);
        m.heads_kv = column_size(s, 13);
        m.seqlen_q = column_size(s, 14);
        m.seqlen_k = column_size(s, 15);
        column_text(s, 16, m.fallback, sizeof m.fallback);
        m.count = sqlite3_column_int64(s, 17);
        column_text(s, 18, m.first_seen, sizeof m.first_seen);
        column_text(s, 19, m.last_seen, sizeof m.last_seen);
        m.tuned = sqlite3_column_int(s, 20) != 0;
        if (fn(ud, &m) != 0)
            break;
    }
out:
    ft__db_stmt_done(s);
    return rc;
}
