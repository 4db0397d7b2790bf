/*
 * Kernel packs merged into a database (`flashtune import`): all or nothing, never replacing a
 * kernel of the database.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fs.h"
#include "common/json.h"
#include "common/jsonparse.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "generator/check.h"
#include "generator/family.h"
#include "tuning_db/pack_internal.h"

/* ---- merging into a database ---------------------------------------------------------------- */

/* Whether the database's kernel of a pack kernel's source hash and target is that kernel. */
static int same_kernel(const ft_db_kernel *local, const ft_db_kernel *k, char *why, size_t cap)
{
    if (strcmp(local->family, k->family) != 0 || strcmp(local->variant, k->variant) != 0 ||
        strcmp(local->template_hash, k->template_hash) != 0 || strcmp(local->entry, k->entry) != 0)
        return ft__pack_refuse(why, cap, "it is %.64s %.300s there", local->family, local->variant);
    if (local->source != NULL && strcmp(local->source, k->source) != 0)
        return ft__pack_refuse(why, cap, "its source there is another");
    if (local->cubin != NULL &&
        (local->cubin_size != k->cubin_size || memcmp(local->cubin, k->cubin, k->cubin_size) != 0))
        return ft__pack_refuse(why, cap, "its cubin there is another (%zu bytes there, %zu in the pack)", local->cubin_size,
                      k->cubin_size);
    if (local->cubin != NULL &&
        (local->threads != k->threads || local->registers != k->registers || local->smem_static != k->smem_static ||
         local->smem_dynamic != k->smem_dynamic || local->spill_stores != k->spill_stores ||
         local->spill_loads != k->spill_loads))
        return ft__pack_refuse(why, cap, "its threads, registers, spills or shared memory there are others");
    return 1;
}

/* A pack never replaces a kernel of the database: each of its kernels is either new there or
 * the same. Looked up through a second, read-only handle, which sees the database as the batch
 * (holding the write lock) found it, without writing. */
static ft_status check_local_kernels(ft_db *db, const ft_pack *p, ft_err *err)
{
    ft_status rc;
    ft_db *ro = NULL;
    ft_db_kernel local;
    char why[500];
    ft_err e2;
    int i;

    memset(&local, 0, sizeof local);
    rc = ft__db_open(ft__db_path(db), 1, &ro, err);
    for (i = 0; i < p->nkernels && rc == FT_OK; i++) {
        const ft_db_kernel *k = &p->kernels[i].k;
        long long id = -1;
        ft_status r2 = ft__db_kernel_id(ro, k, &id, &e2);
        if (r2 == FT_ERR_NOT_FOUND)
            continue;
        if (r2 != FT_OK) {
            rc = ft__fail(err, r2, "%s", e2.msg);
            break;
        }
        rc = ft__db_kernel_get(ro, id, &local, err);
        if (rc == FT_OK && !same_kernel(&local, k, why, sizeof why))
            rc = ft__fail(err, FT_ERR_CORRUPT, "kernel %d of the pack (%s %s) has the source hash and target of "
                          "kernel %lld of %s, but %s: a pack never replaces a kernel of the database",
                          i, k->family, k->variant, id, ft__db_path(db), why);
        free((void *)local.source);
        free((void *)local.cubin);
        memset(&local, 0, sizeof local);
    }
    ft__db_close(ro);
    return rc;
}

ft_status ft__pack_import(ft_db *db, const ft_pack *p, const ft_db_device *as, int *winning, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    long long device_id = -1, *ids = NULL;
    int i, began = 0, won = 0;

    if (winning != NULL)
        *winning = 0;
    if (db == NULL || p == NULL) {
        ft__fail(err, rc, "ft__pack_import: NULL argument");
        goto out;
    }
    rc = ft__pack_check(p, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "refused");
        goto out;
    }
    if (as != NULL && as->cc != p->device.cc) {
        rc = ft__fail(err, FT_ERR_UNSUPPORTED, "the pack's cubins are for compute capability %d.%d, %s is %d.%d",
                      p->device.cc / 10, p->device.cc % 10, ft__pack_printable(as->name) ? as->name : "the device",
                      as->cc / 10, as->cc % 10);
        goto out;
    }
    ids = calloc((size_t)p->nkernels, sizeof *ids);
    if (ids == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    rc = ft__db_batch_begin(db, err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    rc = check_local_kernels(db, p, err);
    if (rc == FT_OK)
        rc = ft__db_device_id(db, as != NULL ? as : &p->device, &device_id, err);
    for (i = 0; i < p->nkernels && rc == FT_OK; i++)
        rc = ft__db_kernel_id(db, &p->kernels[i].k, &ids[i], err);
    for (i = 0; i < p->nwinners && rc == FT_OK; i++) {
        ft_db_result r = p->winners[i].r;
        r.device_id = device_id;
        r.kernel_id = ids[p->winners[i].kernel];
        r.status = FT_RESULT_OK;
        r.reason[0] = '\0';
        rc = ft__db_record(db, &r, err);
        if (rc == FT_OK && p->winners[i].measured_at[0] != '\0')
            rc = ft__db_set_measured_at(db, &r, p->winners[i].measured_at, err);
    }
    /* Which of them now win their bucket (a faster local result, or a stale version, may not). */
    for (i = 0; i < p->nwinners && rc == FT_OK; i++) {
        ft_db_row row;
        int found = 0;
        rc = ft__db_winner(db, device_id, &p->winners[i].r.key, &row, NULL, NULL, &found, err);
        if (rc == FT_OK && found && row.result.kernel_id == ids[p->winners[i].kernel])
            won++;
    }
out:
    if (began)
        rc = ft__db_batch_end(db, rc, err);
    if (rc == FT_OK && winning != NULL)
        *winning = won;
    free(ids);
    return rc;
}

