/*
 * The tuning database's devices, kernels, current versions, results, winners, queries and
 * batches.
 */
#include <stdlib.h>

#include "tuning_db/internal.h"

/* ---- devices and kernels ----------------------------------------------------------------- */

static void bind_device(ft_db_binder *b, const ft_db_device *dev)
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
    ft_status rc = ft__db_stmt(db, ST_DEVICE_FIND, &s, err);
    ft_db_binder b;
    int src;

    *found = 0;
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_device(&b, dev);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        *found = 1;
    } else if (src != SQLITE_DONE) {
        rc = ft__db_fail(db, err, "cannot look up a device");
    }
out:
    ft__db_stmt_done(s);
    return rc;
}

ft_status ft__db_device_id(ft_db *db, const ft_db_device *dev, long long *id, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int found = 0, began = 0;
    ft_db_binder b;

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
    rc = ft__db_tx_begin(db, err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    rc = device_find(db, dev, id, &found, err); /* another process may have added it */
    if (rc != FT_OK || found)
        goto out;
    rc = ft__db_stmt(db, ST_DEVICE_INSERT, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_device(&b, dev);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    rc = ft__db_step_id(db, s, id, "cannot add a device", err);
out:
    ft__db_stmt_done(s);
    if (began)
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

static void bind_kernel_key(ft_db_binder *b, const ft_db_kernel *k)
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
    ft_db_binder b;

    if (db == NULL || k == NULL || id == NULL) {
        ft__fail(err, rc, "ft__db_kernel_id: NULL argument");
        goto out;
    }
    if (k->source_hash[0] == '\0' || k->arch[0] == '\0') {
        ft__fail(err, rc, "ft__db_kernel_id: a kernel needs a source hash and an arch");
        goto out;
    }
    /* Found and unchanged: no write. */
    rc = ft__db_stmt(db, ST_KERNEL_FIND, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_kernel_key(&b, k);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        if (sqlite3_column_int(s, 1) != 0 || db->read_only)
            goto out;
    } else if (src != SQLITE_DONE) {
        rc = ft__db_fail(db, err, "cannot look up a kernel");
        goto out;
    } else if (db->read_only) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: no kernel %s for %s", db->path,
                      k->variant, k->arch);
        goto out;
    }
    ft__db_stmt_done(s);
    s = NULL;

    /* New, or compiled again: the latest description wins. */
    rc = ft__db_write_begin(db, ST_KERNEL_UPSERT, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_kernel_key(&b, k);
    bind_int(&b, ":registers", k->registers);
    bind_int(&b, ":spill_stores", k->spill_stores);
    bind_int(&b, ":spill_loads", k->spill_loads);
    bind_int(&b, ":smem_static", k->smem_static);
    bind_int(&b, ":smem_dynamic", k->smem_dynamic);
    bind_int(&b, ":threads", k->threads);
    bind_real(&b, ":compile_ms", k->compile_ms);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    rc = ft__db_step_id(db, s, id, "cannot store a kernel", err);
out:
    ft__db_stmt_done(s);
    if (began)
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

/* ---- current versions -------------------------------------------------------------------- */

static ft_status set_one(ft_db *db, enum ft_db_stmt id, const char *key, const char *text,
                         long long num, ft_err *err)
{
    sqlite3_stmt *s = NULL;
    ft_status rc = ft__db_stmt(db, id, &s, err);
    ft_db_binder b;

    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":key", key, (size_t)-1);
    if (text != NULL)
        bind_text(&b, ":value", text, (size_t)-1);
    else
        bind_int(&b, ":value", num);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = ft__db_fail(db, err, "cannot store the current versions");
out:
    ft__db_stmt_done(s);
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
    rc = ft__db_tx_begin(db, err);
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
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

/* ---- results ----------------------------------------------------------------------------- */

ft_status ft__db_record(ft_db *db, const ft_db_result *r, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    ft_db_binder b;

    if (db == NULL || r == NULL || r->key.op == NULL) {
        ft__fail(err, rc, "ft__db_record: NULL argument or a key without its operation");
        goto out;
    }
    if (!ft__result_status_parse(ft__result_status_name(r->status), NULL)) {
        ft__fail(err, rc, "ft__db_record: status %d is not a result status", (int)r->status);
        goto out;
    }
    rc = ft__db_write_begin(db, ST_RECORD, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", r->device_id);
    bind_int(&b, ":kernel_id", r->kernel_id);
    bind_key(&b, &r->key);
    bind_shape(&b, r->batch, r->heads_q, r->heads_kv, r->seqlen_q, r->seqlen_k);
    bind_text(&b, ":status", ft__result_status_name(r->status), (size_t)-1);
    bind_text(&b, ":reason", r->reason, sizeof r->reason);
    bind_real(&b, ":median_ms", r->median_ms);
    bind_real(&b, ":iqr_ms", r->iqr_ms);
    bind_real(&b, ":tflops", r->tflops);
    bind_real(&b, ":max_error", r->max_error);
    bind_int(&b, ":repetitions", r->repetitions);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = ft__db_fail(db, err, "cannot record a result");
        goto out;
    }
    if (sqlite3_changes(db->sq) == 0)
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: cannot record a result: no device %lld or no kernel %lld",
                      db->path, r->device_id, r->kernel_id);
out:
    ft__db_stmt_done(s);
    if (began)
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

ft_status ft__db_decide(ft_db *db, long long device_id, const ft_key *key, long long kernel_id, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    ft_db_binder b;

    if (db == NULL || key == NULL || key->op == NULL) {
        ft__fail(err, rc, "ft__db_decide: NULL argument or a key without its operation");
        goto out;
    }
    rc = ft__db_write_begin(db, ST_DECIDE, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", device_id);
    bind_int(&b, ":kernel_id", kernel_id);
    bind_key(&b, key);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = ft__db_fail(db, err, "cannot record the decided winner");
out:
    ft__db_stmt_done(s);
    if (began)
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

ft_status ft__db_has_result(ft_db *db, long long device_id, long long kernel_id,
                            const ft_key *bk, int *has, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    ft_db_binder b;
    int src;

    if (db == NULL || bk == NULL || bk->op == NULL || has == NULL) {
        ft__fail(err, rc, "ft__db_has_result: NULL argument");
        goto out;
    }
    *has = 0;
    rc = ft__db_stmt(db, ST_HAS_RESULT, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":device_id", device_id);
    bind_int(&b, ":kernel_id", kernel_id);
    bind_key(&b, bk);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_ROW)
        *has = 1;
    else if (src != SQLITE_DONE)
        rc = ft__db_fail(db, err, "cannot look up a result");
out:
    ft__db_stmt_done(s);
    return rc;
}

ft_status ft__db_winner(ft_db *db, long long device_id, const ft_key *bk, ft_db_row *row,
                        void **cubin, size_t *cubin_size, int *found, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    void *copy = NULL;
    size_t n = 0;
    ft_db_binder b;
    int src;

    if (cubin != NULL)
        *cubin = NULL;
    if (cubin_size != NULL)
        *cubin_size = 0;
    if (found != NULL)
        *found = 0;
    if (db == NULL || bk == NULL || bk->op == NULL || row == NULL || found == NULL ||
        (cubin != NULL && cubin_size == NULL)) {
        ft__fail(err, rc, "ft__db_winner: NULL argument");
        goto out;
    }
    rc = ft__db_stmt(db, ST_WINNER, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":want_cubin", cubin != NULL);
    bind_int(&b, ":device_id", device_id);
    bind_key(&b, bk);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_DONE)
        goto out;
    if (src != SQLITE_ROW) {
        rc = ft__db_fail(db, err, "cannot look up a winner");
        goto out;
    }
    rc = ft__db_read_row(db, s, row, err);
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
    ft__db_stmt_done(s);
    return rc;
}

ft_status ft__db_query(ft_db *db, const ft_db_filter *f,
                       int (*fn)(void *ud, const ft_db_row *row), void *ud, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    ft_db_filter all;
    ft_db_row *row = NULL;
    ft_db_binder b;

    if (db == NULL || fn == NULL) {
        ft__fail(err, rc, "ft__db_query: NULL argument");
        goto out;
    }
    if (f == NULL) {
        ft__db_filter_init(&all);
        f = &all;
    }
    rc = ft__db_stmt(db, ST_QUERY, &s, err);
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
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":device_name", f->device_name, (size_t)-1);
    bind_text(&b, ":op", f->op != NULL ? f->op->name : NULL, (size_t)-1);
    bind_text(&b, ":dtype", f->dtype, (size_t)-1);
    bind_int(&b, ":head_dim", f->head_dim);
    bind_int(&b, ":causal", f->causal < 0 ? -1 : f->causal != 0);
    bind_int(&b, ":winners_only", f->winners_only != 0);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    for (;;) {
        int src = sqlite3_step(s);
        if (src == SQLITE_DONE)
            break;
        if (src != SQLITE_ROW) {
            rc = ft__db_fail(db, err, "cannot query results");
            goto out;
        }
        rc = ft__db_read_row(db, s, row, err);
        if (rc != FT_OK)
            goto out;
        if (fn(ud, row) != 0)
            break;
    }
out:
    free(row);
    ft__db_stmt_done(s);
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
    rc = ft__db_stmt(db, ST_DEVICES, &s, err);
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
            rc = ft__db_fail(db, err, "cannot list devices");
            goto out;
        }
        memset(&dev, 0, sizeof dev);
        column_device(s, 1, &dev);
        if (fn(ud, sqlite3_column_int64(s, 0), &dev, sqlite3_column_int64(s, 9),
               sqlite3_column_int64(s, 10)) != 0)
            break;
    }
out:
    ft__db_stmt_done(s);
    return rc;
}

/* ---- batches and kernel rows (packs) ----------------------------------------------------- */

ft_status ft__db_batch_begin(ft_db *db, ft_err *err)
{
    ft_status rc;

    if (db == NULL || db->batch)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_batch_begin: %s",
                        db == NULL ? "NULL database" : "a batch is already open");
    rc = ft__db_tx_begin(db, err);
    if (rc == FT_OK)
        db->batch = 1;
    return rc;
}

ft_status ft__db_batch_end(ft_db *db, ft_status rc, ft_err *err)
{
    if (db == NULL || !db->batch)
        return rc != FT_OK ? rc : ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__db_batch_end: no batch is open");
    db->batch = 0;
    return ft__db_tx_end(db, rc, err);
}

ft_status ft__db_kernel_get(ft_db *db, long long id, ft_db_kernel *k, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    char *source = NULL;
    void *cubin = NULL;
    ft_db_binder b;
    int src;

    if (k != NULL)
        memset(k, 0, sizeof *k);
    if (db == NULL || k == NULL) {
        ft__fail(err, rc, "ft__db_kernel_get: NULL argument");
        goto out;
    }
    rc = ft__db_stmt(db, ST_KERNEL_GET, &s, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_int(&b, ":id", id);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    src = sqlite3_step(s);
    if (src == SQLITE_DONE) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: no kernel %lld", db->path, id);
        goto out;
    }
    if (src != SQLITE_ROW) {
        rc = ft__db_fail(db, err, "cannot read a kernel");
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
    ft__db_stmt_done(s);
    return rc;
}

ft_status ft__db_set_measured_at(ft_db *db, const ft_db_result *r, const char *measured_at, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    sqlite3_stmt *s = NULL;
    int began = 0;
    ft_db_binder b;

    if (db == NULL || r == NULL || r->key.op == NULL || measured_at == NULL) {
        ft__fail(err, rc, "ft__db_set_measured_at: NULL argument");
        goto out;
    }
    rc = ft__db_write_begin(db, ST_RESULT_WHEN, &s, &began, err);
    if (rc != FT_OK)
        goto out;
    b = (ft_db_binder){s, SQLITE_OK, NULL};
    bind_text(&b, ":measured_at", measured_at, (size_t)-1);
    bind_int(&b, ":device_id", r->device_id);
    bind_int(&b, ":kernel_id", r->kernel_id);
    bind_key(&b, &r->key);
    if (b.rc != SQLITE_OK) {
        rc = ft__db_bind_fail(db, &b, err);
        goto out;
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = ft__db_fail(db, err, "cannot set when a result was measured");
out:
    ft__db_stmt_done(s);
    if (began)
        rc = ft__db_tx_end(db, rc, err);
    return rc;
}

