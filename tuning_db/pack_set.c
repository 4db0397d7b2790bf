/*
 * Kernel packs as ft_kernel_set, the structure a C export compiles into an application: the
 * view of a pack, the checks of a set handed in, and the listing of `import --dry-run`.
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
#include "generator/variant.h"
#include "generator/family.h"
#include "tuning_db/pack_internal.h"

/* ---- the kernel-set view ------------------------------------------------------------------ */

static ft_dtype dtype_of(const char *s)
{
    return strcmp(s, "bf16") == 0 ? FT_BF16 : FT_F16;
}

ft_status ft__pack_kernel_set(ft_pack *p, const ft_kernel_set **out, ft_err *err)
{
    int i;

    if (p == NULL || out == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_kernel_set: NULL argument");
    *out = NULL;
    free(p->entries);
    free(p->entry_ops);
    free(p->entry_keys);
    free(p->key_texts);
    p->entries = calloc((size_t)(p->nwinners > 0 ? p->nwinners : 1), sizeof *p->entries);
    p->entry_ops = calloc((size_t)(p->nwinners > 0 ? p->nwinners : 1), sizeof *p->entry_ops);
    p->entry_keys = calloc((size_t)(p->nwinners > 0 ? p->nwinners : 1), sizeof *p->entry_keys);
    p->key_texts = calloc((size_t)(p->nwinners > 0 ? p->nwinners : 1), sizeof *p->key_texts);
    if (p->entries == NULL || p->entry_ops == NULL || p->entry_keys == NULL || p->key_texts == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < p->nwinners; i++) {
        const ft_pack_winner *w = &p->winners[i];
        const ft_pack_kernel *pk = &p->kernels[w->kernel];
        ft_kernel_set_entry *e = &p->entries[i];
        e->dtype = dtype_of(w->r.key.dtype);
        e->head_dim = (int)ft__key_get(&w->r.key, "d", 0);
        e->causal = (int)ft__key_get(&w->r.key, "causal", 0);
        e->seqlen_bucket = (int)ft__key_get(&w->r.key, "seqlen", 0);
        e->bh_bucket = (int)ft__key_get(&w->r.key, "bh", 0);
        ft__key_format(&w->r.key, p->key_texts[i], sizeof p->key_texts[i]);
        p->entry_ops[i] = w->r.key.op->name;
        p->entry_keys[i] = p->key_texts[i];
        e->variant = pk->k.variant;
        e->family = pk->k.family;
        e->entry = pk->k.entry;
        e->threads = pk->k.threads;
        e->rows_per_block = pk->rows_per_block;
        e->smem_dynamic = pk->k.smem_dynamic;
        e->cubin = pk->k.cubin;      /* shared by the winners of one kernel, never copied */
        e->cubin_size = pk->k.cubin_size;
        e->median_ms = w->r.median_ms;
    }
    memset(&p->set, 0, sizeof p->set);
    p->set.version = FT_KERNEL_SET_VERSION;
    p->set.device_name = p->device.name;
    p->set.cc = p->device.cc;
    p->set.sms = p->device.sms;
    p->set.smem_per_block = p->device.smem_per_block;
    p->set.smem_per_sm = p->device.smem_per_sm;
    p->set.l2_bytes = p->device.l2_bytes;
    p->set.driver_version = p->device.driver_version;
    p->set.nvrtc_version = p->device.nvrtc_version;
    p->set.flashtune_version = p->flashtune_version;
    p->set.created = p->created;
    p->set.count = p->nwinners;
    p->set.entries = p->entries;
    p->set.ops = p->entry_ops;
    p->set.keys = p->entry_keys;
    *out = &p->set;
    return FT_OK;
}

ft_status ft__kernel_set_key(const ft_kernel_set *s, int i, ft_key *out, ft_err *err)
{
    const ft_kernel_set_entry *e = &s->entries[i];
    const ft_op *op;

    if (s->version < 2) { /* flashtune 0.1: the forward's bucket, in the key's form of then */
        char text[FT_KEY_TEXT_MAX];
        snprintf(text, sizeof text, "{\"dtype\":\"%s\",\"d\":%d,\"causal\":%d,\"seqlen\":%d,\"bh\":%d}",
                 e->dtype == FT_BF16 ? "bf16" : "f16", e->head_dim, e->causal, e->seqlen_bucket, e->bh_bucket);
        return ft__key_parse(&ft__op_fwd, text, out, err);
    }
    if (s->ops == NULL || s->keys == NULL || s->ops[i] == NULL || s->keys[i] == NULL)
        return ft__fail(err, FT_ERR_CORRUPT, "entry %d of the kernel set has no operation or key", i);
    op = ft__op_find(s->ops[i]);
    if (op == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "entry %d of the kernel set is of an operation this library does "
                        "not have", i);
    return ft__key_parse(op, s->keys[i], out, err);
}

/* The checks of one entry of an application's kernel set, for a set of compute capability cc. */
static int check_entry(const ft_kernel_set_entry *e, const ft_key *key, int cc, char *why, size_t cap)
{
    const ft_family *fam;
    char msg[300];
    ft_arch a;

    if ((e->dtype != FT_F16 && e->dtype != FT_BF16) || e->head_dim <= 0 || (e->causal != 0 && e->causal != 1))
        return ft__pack_refuse(why, cap, "its dtype, head dim or causality are malformed");
    if (strcmp(key->dtype, e->dtype == FT_BF16 ? "bf16" : "f16") != 0 || ft__key_get(key, "d", -1) != e->head_dim ||
        ft__key_get(key, "causal", -1) != e->causal)
        return ft__pack_refuse(why, cap, "its key does not have its dtype, head dim and causality");
    if (key->op == &ft__op_fwd &&
        (ft__key_get(key, "seqlen", -1) != e->seqlen_bucket || ft__key_get(key, "bh", -1) != e->bh_bucket))
        return ft__pack_refuse(why, cap, "its key does not have its buckets");
    if (key->op == &ft__op_fwd &&
        (!ft__pack_pow2(ft__key_get(key, "seqlen", 0)) || ft__key_get(key, "seqlen", 0) < 64 ||
         !ft__pack_pow2(ft__key_get(key, "bh", 0))))
        return ft__pack_refuse(why, cap, "its buckets are not powers of two (seqlen at least 64)");
    if (e->entry == NULL || !ft__pack_identifier(e->entry) || strlen(e->entry) >= 256 || e->variant == NULL ||
        e->family == NULL || !ft__pack_all_of(e->family, LOWER_DIGITS_, 1))
        return ft__pack_refuse(why, cap, "its entry, variant or family is missing or malformed");
    if (e->cubin == NULL || e->cubin_size == 0 || e->threads <= 0 || e->threads > 1024 || e->rows_per_block <= 0 ||
        e->smem_dynamic < 0)
        return ft__pack_refuse(why, cap, "it has no cubin, or its threads, rows per block or shared memory are out of range");
    if (!ft__variant_check(e->variant, e->dtype == FT_BF16 ? "bf16" : "f16", e->head_dim, e->causal,
                           (int)ft__key_get(key, "det", 0), 0, msg, sizeof msg))
        return ft__pack_refuse(why, cap, "%s", msg);
    if (e->rows_per_block != ft__pack_rows_per_block(e->family, e->variant))
        return ft__pack_refuse(why, cap, "it takes %d rows per block, but a %s kernel of its variant takes %d",
                               e->rows_per_block, e->family, ft__pack_rows_per_block(e->family, e->variant));
    fam = ft__family_find(e->family);
    memset(&a, 0, sizeof a);
    snprintf(a.name, sizeof a.name, "sm_%d", cc);
    a.cc = cc;
    if (fam != NULL && !ft__family_supports_arch(fam, &a, msg, sizeof msg))
        return ft__pack_refuse(why, cap, "%s", msg);
    if (!ft__family_cubin_check(e->family, e->cubin, e->cubin_size, cc, e->entry, msg, sizeof msg))
        return ft__pack_refuse(why, cap, "%s", msg);
    return 1;
}

static int cmp_set_key(const void *a, const void *b)
{
    return ft__key_cmp(a, b);
}

ft_status ft__kernel_set_check(const ft_kernel_set *s, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    ft_key *keys = NULL;
    char why[400];
    int i;

    if (s == NULL) {
        ft__fail(err, rc, "the kernel set is NULL");
        goto out;
    }
    if (s->version < 1 || s->version > FT_KERNEL_SET_VERSION) {
        ft__fail(err, rc, "the kernel set has version %d; this library reads versions 1 to %d (export it again "
                 "with this flashtune)", s->version, FT_KERNEL_SET_VERSION);
        goto out;
    }
    if (s->count < 0 || s->count > FT_PACK_MAX_WINNERS || (s->count > 0 && s->entries == NULL) ||
        s->device_name == NULL || s->cc < 10 || s->cc > 999) {
        ft__fail(err, rc, "the kernel set has no entries (or more than %d), no device name or no compute capability",
                 FT_PACK_MAX_WINNERS);
        goto out;
    }
    keys = calloc((size_t)(s->count > 0 ? s->count : 1), sizeof *keys);
    if (keys == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory checking a kernel set");
        goto out;
    }
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = &s->entries[i];
        ft_err kerr;
        if (ft__kernel_set_key(s, i, &keys[i], &kerr) != FT_OK) {
            ft__fail(err, rc, "entry %d of the kernel set is malformed: %s", i, kerr.msg);
            goto out;
        }
        if (!check_entry(e, &keys[i], s->cc, why, sizeof why)) {
            ft__fail(err, rc, "entry %d of the kernel set (%s) is malformed: %s", i,
                     e->variant != NULL && ft__pack_printable(e->variant) ? e->variant : "no variant", why);
            goto out;
        }
    }
    qsort(keys, (size_t)s->count, sizeof *keys, cmp_set_key);
    for (i = 1; i < s->count; i++) {
        if (ft__key_cmp(&keys[i - 1], &keys[i]) == 0) {
            char text[FT_KEY_TEXT_MAX];
            ft__key_format(&keys[i], text, sizeof text);
            ft__fail(err, rc, "the kernel set has two entries for %s %s", keys[i].op->name,
                     ft__pack_printable(text) ? text : "?");
            goto out;
        }
    }
    rc = FT_OK;
out:
    free(keys);
    return rc;
}

/* One entry of a listing: its operation and key text (what orders the listing), and the entry. */
typedef struct listed {
    const char *op, *key;
    const ft_kernel_set_entry *e;
} listed;

static int cmp_listed(const void *a, const void *b)
{
    const listed *x = a, *y = b;
    const int c = strcmp(x->op, y->op);

    return c != 0 ? c : strcmp(x->key, y->key);
}

ft_status ft__pack_list(const ft_kernel_set *s, ft_pack_line_fn fn, void *ud, ft_err *err)
{
    listed *order;
    int i;

    order = malloc((size_t)(s->count > 0 ? s->count : 1) * sizeof *order);
    if (order == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory listing %d winners", s->count);
    for (i = 0; i < s->count; i++) {
        order[i].op = s->ops[i];
        order[i].key = s->keys[i];
        order[i].e = &s->entries[i];
    }
    qsort(order, (size_t)s->count, sizeof *order, cmp_listed);
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = order[i].e;
        char line[1600], hex[65];
        ft__pack_sha256_hex(e->cubin, e->cubin_size, hex);
        snprintf(line, sizeof line, "%s %s %s %s %d %d %lld %zu %s", order[i].op, order[i].key,
                 e->variant ? e->variant : "-", e->entry, e->threads, e->rows_per_block, e->smem_dynamic,
                 e->cubin_size, hex);
        fn(ud, line);
    }
    free(order);
    return FT_OK;
}

