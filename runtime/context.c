/*
 * The public runtime: contexts, ft_attention_forward and ft_attention_backward.
 *
 * A context keeps a small table of loaded kernels keyed by the call's key (ops/op.h: the
 * operation, dtype, head dim, causality, sequence-length and batch·heads buckets, and the
 * backward's determinism and group size); the forward's and the backward's kernels share it. The first call for a key
 * builds its kernel (generate, compile through the cache, load) under
 * the context's lock; later calls find it in the table and only launch: no compilation, no
 * allocation, no file access on that path.
 *
 * Misses: with FLASHTUNE_RECORD_MISSES=1 in the environment, a slot built without its own
 * key's tuned winner (the nearest key's winner or the built-in default ran instead) is
 * recorded in the tuning database's misses table, so that `flashtune tune --misses` can tune
 * exactly those buckets. That happens when the slot is built, under the lock, through a
 * second, writable handle opened at the first miss; calls that find their slot never
 * touch it.
 *
 * A tuned kernel comes from outside this process (a pack, the application's kernel set, a
 * database another tool wrote): before its cubin is loaded it passes the checks of a pack's
 * (runtime/dispatch.h): it computes the call's dtype, head dim and causality, and its cubin is
 * an ELF image for this GPU's SM that defines its entry. One that fails them is not used.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtune.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/text.h"
#include "generator/family.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/args.h"
#include "runtime/defaults.h"
#include "runtime/dispatch.h"
#include "runtime/session.h"
#include "tuning_db/db.h"
#include "runtime/kernel_set.h"
#include "tuning_db/pack.h"

#define MAX_KERNELS 512

/* Scratch for the nearest-key search: the winners' keys of one (operation, dtype, d, causal). */
typedef struct nearest_ctx {
    long long device_id;
    ft_key keys[256];
    int n;
} nearest_ctx;

typedef struct kernel_slot {
    ft_key key;       /* the kind of calls it serves */
    int needs;        /* what its calls give beyond dense tensors (ops/op.h FT_NEEDS_*): a
                         variable-length batch or a KV cache, which some kernels read */
    int bf16;
    ft_status status; /* FT_OK: k is loaded; otherwise why this key has no kernel */
    const char *fallback; /* NULL: the bucket's own winner (or a forced variant, or a head dim
                             no kernel has); else a miss: "nearest", "default", "failed" */
    ft_kernel k;
    char error[512];
    char how[700];    /* FT_OK: which kernel, and how it was chosen (ft_attention_kernel) */
} kernel_slot;

struct ft_context {
    ft_session session;
    ft_spec *spec;
    ft_spec *more[8];          /* the other built-in specs whose kernels run on this GPU
                                  (flash_fwd_sm90 on compute capability 9.0, flash_bwd); with
                                  options->spec set, only those of the other operations */
    int nmore;
    char *variant;             /* forced (partial) variant, or NULL */
    ft_db *db;                 /* tuning database, or NULL */
    long long device_id;       /* this GPU in db, or -1 */
    ft_db_device dev;          /* this GPU's fingerprint in tuning databases */
    int record_misses;         /* FLASHTUNE_RECORD_MISSES: record misses in miss_path */
    char *miss_path;           /* NULL: the default database */
    ft_db *miss_db;            /* writable; opened at the first miss */
    long long miss_device_id;  /* this GPU in miss_db */
    pthread_mutex_t lock;      /* guards the slots and nearest */
    nearest_ctx nearest;
    int nslots;
    kernel_slot slots[MAX_KERNELS];
    const ft_kernel_set *kset; /* winners from a pack or the application, instead of db; or NULL */
    ft_pack *pack;             /* the pack kset points into, or NULL */
    ft_key *kset_keys;         /* the key of each kset entry */
};

/* The per-thread last error: the context it belongs to and its message. */
static _Thread_local const ft_context *error_ctx;
static _Thread_local char error_msg[FT_ERR_MSG_MAX];

static ft_status set_error(const ft_context *ctx, ft_status rc, const char *msg)
{
    error_ctx = ctx;
    snprintf(error_msg, sizeof error_msg, "%s", msg);
    return rc;
}

const char *ft_last_error(const ft_context *ctx)
{
    return error_ctx == ctx ? error_msg : "";
}

/* Opens the tuning database (read-only) and finds this GPU in it. A default database that
 * does not exist is no error: the context then uses the built-in defaults. */
static ft_status open_database(ft_context *ctx, const char *path, ft_err *err)
{
    char buf[4096];
    ft_status rc;

    ctx->device_id = -1;
    if (path != NULL && path[0] == '\0')
        return FT_OK;
    if (path == NULL) {
        if (ft__db_default_path(buf, sizeof buf, 0, err) != FT_OK || access(buf, F_OK) != 0)
            return FT_OK; /* no default database: the built-in defaults */
        path = buf;
    }
    rc = ft__db_open(path, 1, &ctx->db, err);
    if (rc != FT_OK)
        return rc;
    rc = ft__db_device_id(ctx->db, &ctx->dev, &ctx->device_id, err);
    if (rc == FT_ERR_NOT_FOUND) { /* nothing tuned for this GPU, driver or NVRTC */
        ctx->device_id = -1;
        rc = FT_OK;
    }
    return rc;
}

/* FLASHTUNE_RECORD_MISSES=1: misses go to the database the context reads, else (database
 * NULL) to the default one, created if need be; database "" records nothing. */
static ft_status misses_setup(ft_context *ctx, const char *database, ft_err *err)
{
    if (!ft__env_on("FLASHTUNE_RECORD_MISSES") || (database != NULL && database[0] == '\0'))
        return FT_OK;
    ctx->record_misses = 1;
    if (ctx->db != NULL || database != NULL) {
        ctx->miss_path = ft__strdup(ctx->db != NULL ? ft__db_path(ctx->db) : database);
        if (ctx->miss_path == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return FT_OK;
}

/* Records the miss of a slot just built (under the context's lock). Recording never fails a
 * call: the first failure is printed once and recording stops. */
static void record_miss(ft_context *ctx, const kernel_slot *slot, const ft_problem *p)
{
    ft_status rc = FT_OK;
    ft_db_miss m;
    ft_err err;

    if (!ctx->record_misses || slot->fallback == NULL)
        return;
    if (ctx->miss_db == NULL) {
        rc = ft__db_open(ctx->miss_path, 0, &ctx->miss_db, &err);
        if (rc == FT_OK)
            rc = ft__db_device_id(ctx->miss_db, &ctx->dev, &ctx->miss_device_id, &err);
    }
    if (rc == FT_OK) {
        memset(&m, 0, sizeof m);
        m.device_id = ctx->miss_device_id;
        m.key = slot->key;
        m.batch = p->batch, m.heads_q = p->heads_q, m.heads_kv = p->heads_kv;
        m.seqlen_q = p->seqlen_q, m.seqlen_k = p->seqlen_k;
        snprintf(m.fallback, sizeof m.fallback, "%s", slot->fallback);
        rc = ft__db_record_miss(ctx->miss_db, &m, &err);
    }
    if (rc != FT_OK) {
        ft__log(FT_LOG_WARNING, "FLASHTUNE_RECORD_MISSES: %s; no more misses are recorded", err.msg);
        ctx->record_misses = 0;
    }
}

/* The size of a version's options structure: version 1 ends before pack. */
static size_t options_size(int version)
{
    return version == 1 ? offsetof(ft_context_options, pack) : sizeof(ft_context_options);
}

void ft_context_options_init_version(ft_context_options *o, int version)
{
    if (o == NULL || version < 1 || version > FT_OPTIONS_VERSION)
        return;
    memset(o, 0, options_size(version));
    o->version = version;
}

/* The exported function of the version-1 API, for programs built against it (the header's
 * macro of the same name calls ft_context_options_init_version). */
void (ft_context_options_init)(ft_context_options *o)
{
    ft_context_options_init_version(o, 1);
}

/* Reads the pack, or checks the application's kernel set, before the driver is loaded. */
static ft_status open_kernels(ft_context *ctx, const ft_context_options *o, ft_err *err)
{
    ft_status rc = FT_OK;
    int i;

    if (o->pack == NULL && o->kernels == NULL)
        return FT_OK;
    if (o->pack != NULL && o->kernels != NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft_context_create: set pack or kernels, not both");
    if (o->database != NULL && o->database[0] != '\0')
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "ft_context_create: a pack or kernel set replaces the database (database must be NULL or \"\")");
    if (o->pack != NULL) {
        ctx->pack = calloc(1, sizeof *ctx->pack);
        if (ctx->pack == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        rc = ft__pack_read(o->pack, ctx->pack, err);
        if (rc == FT_OK)
            rc = ft__pack_kernel_set(ctx->pack, &ctx->kset, err);
    } else {
        rc = ft__kernel_set_check(o->kernels, err);
        if (rc == FT_OK)
            ctx->kset = o->kernels;
    }
    if (rc != FT_OK)
        return rc;
    ctx->kset_keys = calloc((size_t)(ctx->kset->count > 0 ? ctx->kset->count : 1), sizeof *ctx->kset_keys);
    if (ctx->kset_keys == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < ctx->kset->count; i++) {
        rc = ft__kernel_set_key(ctx->kset, i, &ctx->kset_keys[i], err);
        if (rc != FT_OK)
            return rc;
    }
    return FT_OK;
}

/* A kernel set runs on the compute capability it was compiled for; another model or driver
 * of it is fine (the choices may just not be the fastest). */
static ft_status check_kernels_device(ft_context *ctx, ft_err *err)
{
    const ft_kernel_set *s = ctx->kset;

    if (s->cc != ctx->dev.cc)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the %s was tuned on %s (compute capability %d.%d); GPU %d is %s "
                        "(compute capability %d.%d): its cubins cannot run there",
                        ctx->pack != NULL ? "pack" : "kernel set", s->device_name, s->cc / 10, s->cc % 10,
                        ctx->session.device, ctx->dev.name, ctx->dev.cc / 10, ctx->dev.cc % 10);
    if (strcmp(s->device_name, ctx->dev.name) != 0 || s->driver_version != ctx->dev.driver_version)
        ft__log(FT_LOG_DEBUG, "the %s was tuned on %s (driver %d); this GPU is %s (driver %d): using it anyway",
                ctx->pack != NULL ? "pack" : "kernel set", s->device_name, s->driver_version, ctx->dev.name,
                ctx->dev.driver_version);
    return FT_OK;
}

/* The operation a spec's kernels compute, or NULL for an unknown family. */
static const ft_op *spec_op(const ft_spec *spec)
{
    const ft_family *fam = ft__family_find(spec->template_name);
    return fam != NULL ? fam->op : NULL;
}

/* The built-in specs besides the context's own whose kernel family runs on the context's GPU:
 * with the built-in default spec, every other one; with options->spec (own_spec), those of the
 * other operations (a forward spec of one's own still leaves the built-in backward). */
static ft_status load_more_specs(ft_context *ctx, int own_spec, ft_err *err)
{
    ft_status rc = FT_OK;
    int i;

    for (i = own_spec ? 0 : 1;
         ft__builtin_specs[i].name != NULL && ctx->nmore < (int)(sizeof ctx->more / sizeof ctx->more[0]); i++) {
        ft_spec *spec = NULL;
        const ft_family *fam;
        char why[256];

        rc = ft__spec_load_builtin(i, &spec, err);
        if (rc != FT_OK)
            break;
        fam = ft__family_find(spec->template_name);
        if (fam != NULL && ft__family_supports_arch(fam, &ctx->session.arch, why, sizeof why) &&
            !(own_spec && fam->op == spec_op(ctx->spec)))
            ctx->more[ctx->nmore++] = spec;
        else
            ft__spec_free(spec);
    }
    return rc;
}

ft_status ft_context_create(const ft_context_options *options, ft_context **out)
{
    ft_context_options defaults, opts;
    ft_context *ctx = NULL;
    ft_err err;
    ft_status rc;

    if (out == NULL)
        return set_error(NULL, FT_ERR_INVALID_ARGUMENT, "ft_context_create: ctx is NULL");
    *out = NULL;
    if (options == NULL) {
        ft_context_options_init(&defaults);
        options = &defaults;
    }
    if (options->version < 1 || options->version > FT_OPTIONS_VERSION)
        return set_error(NULL, FT_ERR_INVALID_ARGUMENT,
                         "ft_context_create: options were not set up by ft_context_options_init "
                         "(version is not 1 or 2)");
    /* An older, smaller structure: only its own fields are read, the rest are defaults. */
    ft_context_options_init_version(&opts, FT_OPTIONS_VERSION);
    memcpy(&opts, options, options_size(options->version));
    opts.version = FT_OPTIONS_VERSION;
    options = &opts;
    ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return set_error(NULL, FT_ERR_OUT_OF_MEMORY, "ft_context_create: out of memory");
    pthread_mutex_init(&ctx->lock, NULL);
    rc = open_kernels(ctx, options, &err);
    if (rc == FT_OK)
        rc = ft__spec_load_default(options->spec, &ctx->spec, &err);
    if (rc == FT_OK)
        rc = ft__spec_family(ctx->spec, &err) != NULL ? FT_OK : FT_ERR_SPEC;
    if (rc == FT_OK && options->variant != NULL) {
        ft_variant v;
        unsigned mask;
        ctx->variant = ft__strdup(options->variant);
        rc = ctx->variant == NULL ? ft__fail(&err, FT_ERR_OUT_OF_MEMORY, "out of memory")
                                  : ft__spec_add_values(ctx->spec, options->variant, &err);
        if (rc == FT_OK)
            rc = ft__variant_filter_parse(ctx->spec, options->variant, &v, &mask, &err);
    }
    if (rc == FT_OK)
        rc = ft__session_open(options->device, options->cache_dir, 0, &ctx->session, &err);
    if (rc == FT_OK)
        rc = load_more_specs(ctx, options->spec != NULL, &err);
    if (rc == FT_OK) {
        ft__session_fingerprint(&ctx->session, &ctx->dev);
        rc = ctx->kset != NULL ? check_kernels_device(ctx, &err) : open_database(ctx, options->database, &err);
    }
    if (rc == FT_OK)
        rc = misses_setup(ctx, options->database, &err);
    if (rc != FT_OK) {
        set_error(NULL, rc, err.msg);
        ft_context_destroy(ctx);
        return rc;
    }
    *out = ctx;
    return FT_OK;
}

void ft_context_destroy(ft_context *ctx)
{
    int i;

    if (ctx == NULL)
        return;
    if (ctx->session.cu != NULL) {
        ft__cuda_use_device(ctx->session.cu, ctx->session.device, &ctx->session.ctx, NULL);
        for (i = 0; i < ctx->nslots; i++)
            if (ctx->slots[i].status == FT_OK)
                ft__kernel_unload(ctx->session.cu, &ctx->slots[i].k);
        ft__cuda_release(ctx->session.cu, ctx->session.device);
    }
    ft__session_close(&ctx->session);
    ft__db_close(ctx->db);
    ft__pack_free(ctx->pack);
    free(ctx->pack);
    free(ctx->kset_keys);
    ft__db_close(ctx->miss_db);
    free(ctx->miss_path);
    ft__spec_free(ctx->spec);
    for (i = 0; i < ctx->nmore; i++)
        ft__spec_free(ctx->more[i]);
    free(ctx->variant);
    pthread_mutex_destroy(&ctx->lock);
    if (error_ctx == ctx)
        error_ctx = NULL;
    free(ctx);
}

/* The context's spec of a kernel family, or NULL. */
static ft_spec *spec_of_family(const ft_context *ctx, const char *family)
{
    int i;

    if (strcmp(ctx->spec->template_name, family) == 0)
        return ctx->spec;
    for (i = 0; i < ctx->nmore; i++)
        if (strcmp(ctx->more[i]->template_name, family) == 0)
            return ctx->more[i];
    return NULL;
}

/* Whether spec's d lists head_dim or is open (its constraints then decide), or it has no d. */
static int spec_takes_dim(const ft_spec *spec, long long head_dim)
{
    const int di = ft__spec_param_index(spec, "d");

    return di < 0 || spec->params[di].open || ft__param_has_int(&spec->params[di], head_dim);
}

/* For messages: the head dims that the context's specs of op list, in order, followed by " and
 * others their constraints keep" when one of those specs has an open d. */
static void dims_text(const ft_context *ctx, const ft_op *op, char *buf, size_t cap)
{
    long long dims[FT_MAX_VALUES];
    int n = 0, open = 0, i, j, k;
    size_t len = 0;

    buf[0] = '\0';
    for (i = -1; i < ctx->nmore; i++) {
        const ft_spec *s = i < 0 ? ctx->spec : ctx->more[i];
        const int di = ft__spec_param_index(s, "d");
        if (spec_op(s) != op || di < 0)
            continue;
        open |= s->params[di].open;
        for (j = 0; j < s->params[di].nlisted; j++) {
            for (k = 0; k < n && dims[k] != s->params[di].ints[j]; k++)
                ;
            if (k == n && n < FT_MAX_VALUES)
                dims[n++] = s->params[di].ints[j];
        }
    }
    for (i = 1; i < n; i++) /* insertion sort: a handful */
        for (j = i; j > 0 && dims[j - 1] > dims[j]; j--) {
            long long t = dims[j];
            dims[j] = dims[j - 1];
            dims[j - 1] = t;
        }
    for (i = 0; i < n && len + 1 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", dims[i]);
    if (open && len + 1 < cap)
        snprintf(buf + len, cap - len, " and others their constraints keep");
}

static int collect_key(void *ud, const ft_db_row *row)
{
    nearest_ctx *c = ud;
    if (row->result.device_id == c->device_id && row->winner && row->result.key.op != NULL && c->n < 256)
        c->keys[c->n++] = row->result.key;
    return 0;
}

/* Loads the database's winner for the slot's bucket, or for the nearest tuned bucket.
 * Returns 1 when a kernel was loaded; 0 to fall back (why in how). */
static int load_tuned(ft_context *ctx, kernel_slot *slot, char *how, size_t cap)
{
    ft_key want = slot->key;
    ft_db_row row;
    void *cubin = NULL;
    size_t size = 0;
    int found = 0, exact = 0, ok = 0;
    char why[400], bucket[96];
    ft_err err;
    ft_variant v;
    ft_kernel_source src;
    ft_spec *spec;

    memset(&src, 0, sizeof src);
    if (ft__db_winner(ctx->db, ctx->device_id, &want, &row, &cubin, &size, &found, &err) != FT_OK) {
        snprintf(how, cap, "database: %s", err.msg);
        return 0;
    }
    if (found) {
        exact = 1;
        snprintf(how, cap, "tuned for this bucket");
    } else {
        nearest_ctx *nc = &ctx->nearest;
        ft_db_filter f;
        int pick;
        memset(nc, 0, sizeof *nc);
        nc->device_id = ctx->device_id;
        ft__db_filter_init(&f);
        f.op = want.op;
        f.dtype = want.dtype;
        f.head_dim = (int)ft__key_get(&want, "d", -1);
        f.causal = (int)ft__key_get(&want, "causal", -1);
        f.winners_only = 1;
        if (ft__db_query(ctx->db, &f, collect_key, nc, &err) != FT_OK) {
            snprintf(how, cap, "database: %s", err.msg);
            return 0;
        }
        pick = ft__key_nearest(&want, nc->keys, nc->n);
        if (pick < 0) {
            snprintf(how, cap, "nothing tuned for %s d=%lld causal=%lld", want.dtype, ft__key_get(&want, "d", 0),
                     ft__key_get(&want, "causal", 0));
            return 0;
        }
        if (ft__db_winner(ctx->db, ctx->device_id, &nc->keys[pick], &row, &cubin, &size, &found, &err) != FT_OK ||
            !found) {
            snprintf(how, cap, "database: %s", found ? err.msg : "the nearest bucket lost its winner");
            return 0;
        }
        ft__key_describe(&nc->keys[pick], bucket, sizeof bucket);
        snprintf(how, cap, "tuned for the nearest bucket (%s)", bucket);
    }
    spec = spec_of_family(ctx, row.family);
    if (cubin == NULL)
        snprintf(how, cap, "the winner %s has no stored cubin", row.variant);
    else if (spec == NULL)
        snprintf(how, cap, "the winner %s is of family %s, which this context does not load", row.variant,
                 row.family);
    else if (ft__spec_add_values(spec, row.variant, &err) != FT_OK || ft__variant_parse(spec, row.variant, &v, &err) != FT_OK ||
             ft__emit(spec, ft__family_find(spec->template_name), &v, &ctx->session.arch, &src, &err) != FT_OK)
        snprintf(how, cap, "the winner %s cannot be used: %s", row.variant, err.msg);
    else if (!ft__db_winner_check(spec, &v, row.family, row.arch, &want, cubin, size, src.entry,
                                  ctx->session.arch.cc, why, sizeof why))
        snprintf(how, cap, "the winner %s cannot be used: %s", row.variant, why);
    else if (ft__session_load(&ctx->session, spec, &v, cubin, src.entry, src.smem_dynamic, src.threads, &slot->k,
                              &err) != FT_OK)
        snprintf(how, cap, "the winner %s cannot be used: %s", row.variant, err.msg);
    else {
        ok = 1;
        slot->fallback = exact ? NULL : "nearest";
        snprintf(how + strlen(how), cap - strlen(how), ": %s", row.variant);
    }
    ft__kernel_source_free(&src);
    free(cubin);
    return ok;
}

/* Loads the kernel set's winner for the slot's bucket, or the nearest tuned bucket's (the same
 * choice as load_tuned makes from a database). Returns 1 when a kernel was loaded; 0 to fall
 * back (why in how). */
static int load_from_set(ft_context *ctx, kernel_slot *slot, char *how, size_t cap)
{
    const ft_key *want = &slot->key;
    const ft_kernel_set_entry *e;
    const ft_key *got;
    int pick = ft__key_nearest(want, ctx->kset_keys, ctx->kset->count), exact;
    char bucket[96];
    ft_err err;

    if (pick < 0) {
        snprintf(how, cap, "nothing in the %s for %s d=%lld causal=%lld", ctx->pack != NULL ? "pack" : "kernel set",
                 want->dtype, ft__key_get(want, "d", 0), ft__key_get(want, "causal", 0));
        return 0;
    }
    e = &ctx->kset->entries[pick];
    got = &ctx->kset_keys[pick];
    exact = ft__key_equal(got, want);
    if (ft__kernel_set_load(ctx->session.cu, &ctx->session.arch, e, &slot->k, &err) != FT_OK) {
        snprintf(how, cap, "the %s's winner %s cannot be used: %s", ctx->pack != NULL ? "pack" : "kernel set",
                 e->variant != NULL ? e->variant : e->entry, err.msg);
        return 0;
    }
    slot->fallback = exact ? NULL : "nearest";
    if (exact)
        snprintf(how, cap, "%s, tuned for this bucket: %s", ctx->pack != NULL ? "pack" : "kernel set",
                 e->variant != NULL ? e->variant : e->entry);
    else {
        ft__key_describe(got, bucket, sizeof bucket);
        snprintf(how, cap, "%s, tuned for the nearest bucket (%s): %s", ctx->pack != NULL ? "pack" : "kernel set",
                 bucket, e->variant != NULL ? e->variant : e->entry);
    }
    return 1;
}

/* A variant of spec for the slot's calls: base (a whole or partial variant text) completed for
 * the key (its head dim, causality, determinism and dtype, and the spec's parameter defaults,
 * where base leaves them out: ft__default_complete), written to text (cap bytes) and parsed
 * into v. FT_ERR_UNSUPPORTED when base
 * fixes one of them to another value than the call's. */
static ft_status complete_variant(ft_spec *spec, const char *base, const kernel_slot *slot, char *text, size_t cap,
                                  ft_variant *v, ft_err *err)
{
    ft_problem p;
    ft_status rc;

    if (ft__default_complete(spec, base, ft__key_get(&slot->key, "d", 0), ft__key_get(&slot->key, "causal", 0),
                             ft__key_get(&slot->key, "det", 0), slot->key.dtype, text, cap) >= cap)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the variant '%.200s' is too long", base);
    /* the call's head dim where the spec's list lacks it and takes more (open) */
    rc = ft__spec_add_values(spec, text, err);
    if (rc == FT_OK)
        rc = ft__variant_parse(spec, text, v, err);
    if (rc != FT_OK)
        return rc;
    memset(&p, 0, sizeof p);
    ft__variant_problem(spec, v, &p);
    if (p.head_dim != ft__key_get(&slot->key, "d", 0) || p.causal != ft__key_get(&slot->key, "causal", 0) ||
        p.bf16 != slot->bf16 || p.deterministic != ft__key_get(&slot->key, "det", 0))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the variant '%.200s' does not compute this call (d=%lld, causal=%lld, "
                        "%s%s)", base, ft__key_get(&slot->key, "d", 0), ft__key_get(&slot->key, "causal", 0),
                        slot->key.dtype, ft__key_get(&slot->key, "det", 0) ? ", deterministic" : "");
    return FT_OK;
}

/* Whether v has a value that an open parameter of spec does not list but was given. */
static int added_value(const ft_spec *spec, const ft_variant *v)
{
    int i;

    for (i = 0; i < spec->nparams; i++)
        if (spec->params[i].open && v->idx[i] >= spec->params[i].nlisted)
            return 1;
    return 0;
}

/* Builds one variant text for the slot through the cache: FT_OK with the kernel loaded and
 * what ran in how, or the status with the reason in err. */
static ft_status build_variant(ft_context *ctx, kernel_slot *slot, ft_spec *spec, const char *base, const char *label,
                               ft_err *err)
{
    char text[1024];
    const size_t used = strlen(slot->how);
    ft_variant v;
    char why[256];
    int keep = 1;
    ft_status rc = complete_variant(spec, base, slot, text, sizeof text, &v, err);

    /* A value an open parameter took for this call (a head dim no list has) may be one the
     * template lacks: the spec's constraints say. (Listed values are built as given, a forced
     * variant that the spec would prune too.) */
    if (rc == FT_OK && added_value(spec, &v) &&
        (rc = ft__spec_check(spec, &v, &ctx->session.arch, &keep, why, sizeof why, err)) == FT_OK && !keep)
        rc = ft__fail(err, FT_ERR_UNSUPPORTED, "%s prunes %s: %s", spec->name, text, why);
    if (rc == FT_OK)
        rc = ft__session_build(&ctx->session, spec, &v, &slot->k, NULL, err);
    if (rc == FT_OK)
        snprintf(slot->how + used, sizeof slot->how - used, "%s%s: %s", used ? "; " : "", label, text);
    return rc;
}

/* The diagnostic line of a slot's kernel choice: its key, and how it was chosen or why none. */
static void log_choice(const kernel_slot *slot, const char *how)
{
    char key[FT_KEY_TEXT_MAX];

    ft__key_format(&slot->key, key, sizeof key);
    ft__log(FT_LOG_DEBUG, "%s %s: %s", slot->key.op->name, key, slot->status == FT_OK ? how : slot->error);
}

/* What a slot's calls give that not every kernel reads, for messages. */
static const char *needs_text(int needs)
{
    return needs == FT_NEEDS_PACKED ? "variable-length batch" : "KV cache or variable-length batch without its totals";
}

/* Whether the slot's loaded kernel takes the slot's calls (ft__facts_take): any kernel dense
 * calls, a kernel that reads packed batches or a split-key kernel the others. Otherwise unloads
 * it, says so in how and returns 0. */
static int takes_call(ft_context *ctx, kernel_slot *slot, char *how, size_t cap)
{
    const size_t used = strlen(how);

    if (ft__facts_take(&slot->k.facts, slot->needs))
        return 1;
    ft__kernel_unload(ctx->session.cu, &slot->k);
    memset(&slot->k, 0, sizeof slot->k);
    slot->fallback = NULL;
    snprintf(how + used, cap - used, "%s, which takes no %s", used ? "" : "a kernel", needs_text(slot->needs));
    return 0;
}

/* Builds the kernel of a slot (under the context's lock): the forced variant (for calls of its
 * spec's operation), else the tuned winner, else the first built-in default that builds,
 * compiled through the cache. */
static void build_slot(ft_context *ctx, kernel_slot *slot)
{
    const int head_dim = (int)ft__key_get(&slot->key, "d", 0);
    const int forced = ctx->variant != NULL && spec_op(ctx->spec) == slot->key.op;
    char *how = slot->how;
    const size_t how_cap = sizeof slot->how;
    int tried = 0;
    size_t i;
    ft_err err;

    how[0] = '\0';
    err.msg[0] = '\0';
    if (!forced && ctx->kset != NULL && load_from_set(ctx, slot, how, how_cap) && takes_call(ctx, slot, how, how_cap)) {
        slot->status = FT_OK;
        goto out;
    }
    if (!forced && ctx->db != NULL && ctx->device_id >= 0 && load_tuned(ctx, slot, how, how_cap) &&
        takes_call(ctx, slot, how, how_cap)) {
        slot->status = FT_OK;
        goto out;
    }
    if (forced) {
        slot->status = build_variant(ctx, slot, ctx->spec, ctx->variant, "forced", &err);
        if (slot->status == FT_OK && !takes_call(ctx, slot, how, how_cap))
            slot->status = ft__fail(&err, FT_ERR_UNSUPPORTED, "the forced variant's family (%s) takes no %s: "
                                    "the split-key family flash_decode_sm80 does", ctx->spec->template_name,
                                    needs_text(slot->needs));
        tried = 1;
    } else {
        const ft_default_kernel *order[FT_DEFAULTS_MAX];
        const size_t n = ft__default_order(&slot->key, slot->needs, order, FT_DEFAULTS_MAX);
        slot->status = FT_ERR_UNSUPPORTED;
        for (i = 0; i < n && slot->status != FT_OK; i++) {
            ft_spec *spec = spec_of_family(ctx, order[i]->family);
            if (spec == NULL || !spec_takes_dim(spec, head_dim))
                continue;
            slot->status = build_variant(ctx, slot, spec, order[i]->variant, "built-in default", &err);
            tried = 1;
        }
    }
    if (!tried) {
        char dims[256];
        dims_text(ctx, slot->key.op, dims, sizeof dims);
        snprintf(slot->error, sizeof slot->error, "no %s kernel for head dim %d (the specs' head dims: %s)",
                 slot->key.op->name, head_dim, dims);
    }
    else if (slot->status != FT_OK)
        snprintf(slot->error, sizeof slot->error, "%s", err.msg);
    if (!forced)
        slot->fallback = slot->status == FT_OK ? "default" : "failed";
out:
    log_choice(slot, how);
}

static const kernel_slot *find_kernel(ft_context *ctx, const ft_key *key, int needs, const ft_problem *p)
{
    kernel_slot *slot = NULL;
    int i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nslots; i++) {
        if (ft__key_equal(&ctx->slots[i].key, key) && ctx->slots[i].needs == needs) {
            slot = &ctx->slots[i];
            break;
        }
    }
    if (slot == NULL && ctx->nslots < MAX_KERNELS) {
        slot = &ctx->slots[ctx->nslots++];
        slot->key = *key;
        slot->needs = needs;
        slot->bf16 = strcmp(key->dtype, "bf16") == 0;
        build_slot(ctx, slot);
        record_miss(ctx, slot, p);
    }
    pthread_mutex_unlock(&ctx->lock);
    return slot;
}

static ft_status check_tensor(const ft_context *ctx, const char *name, const void *p, const int64_t s[3])
{
    char msg[256];

    if (p == NULL) {
        snprintf(msg, sizeof msg, "%s is NULL", name);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if ((uintptr_t)p % 16 != 0) {
        snprintf(msg, sizeof msg, "%s is not 16-byte aligned", name);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (s[0] % 8 != 0 || s[1] % 8 != 0 || s[2] % 8 != 0 || s[0] < 0 || s[1] < 0 || s[2] < 0) {
        snprintf(msg, sizeof msg, "%s's strides (%lld, %lld, %lld) must be non-negative multiples of 8 elements",
                 name, (long long)s[0], (long long)s[1], (long long)s[2]);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    return FT_OK;
}

/* The checks both operations make of a call's problem: dtype, sizes, grouped-query heads and
 * the softmax scale. */
static ft_status check_problem(const ft_context *ctx, ft_dtype dtype, const ft_problem *p)
{
    char msg[256];

    if (dtype != FT_F16 && dtype != FT_BF16)
        return set_error(ctx, FT_ERR_UNSUPPORTED, "dtype must be FT_F16 or FT_BF16");
    if (p->batch <= 0 || p->heads_q <= 0 || p->heads_kv <= 0 || p->seqlen_q <= 0 || p->seqlen_k <= 0 ||
        p->head_dim <= 0) {
        snprintf(msg, sizeof msg, "sizes must be positive (batch %d, heads %d/%d, seqlen %d/%d, head_dim %d)",
                 p->batch, p->heads_q, p->heads_kv, p->seqlen_q, p->seqlen_k, p->head_dim);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (p->heads_q % p->heads_kv != 0) {
        snprintf(msg, sizeof msg, "heads_q (%d) must be a multiple of heads_kv (%d)", p->heads_q, p->heads_kv);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (!(p->scale >= 0) || p->scale > 1e30f)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "softmax_scale must be a positive number (0: 1/sqrt(d))");
    return FT_OK;
}

/* Makes the context's device context current in the calling thread (where none is), then finds
 * (the first time: builds) the kernel of the call's key. */
static ft_status slot_for_call(ft_context *ctx, const ft_op *op, const ft_problem *p, int needs,
                               const kernel_slot **out)
{
    const kernel_slot *slot;
    const ft_cuda *cu = ctx->session.cu;
    CUcontext current = NULL;
    ft_key key;

    cu->p_cuCtxGetCurrent(&current);
    if (current == NULL)
        cu->p_cuCtxSetCurrent(ctx->session.ctx);
    else if (current != ctx->session.ctx)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT,
                         "the calling thread's current CUDA context is not the primary context of this "
                         "flashtune context's device");
    op->key(p, &key);
    slot = find_kernel(ctx, &key, needs, p);
    if (slot == NULL)
        return set_error(ctx, FT_ERR_INTERNAL, "too many kinds of calls on one context");
    if (slot->status != FT_OK)
        return set_error(ctx, slot->status, slot->error);
    *out = slot;
    return FT_OK;
}

/* The checks of a call's KV cache (version 4): what the library can see of seqused_k and the
 * block table (their contents live on the device and are the caller's to keep in range). */
static ft_status check_kv_cache(const ft_context *ctx, const ft_attention_args *a)
{
    char msg[256];

    if (a->seqused_k != NULL && (uintptr_t)a->seqused_k % 4 != 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "seqused_k is not 4-byte aligned");
    if ((a->cu_seqlens_q != NULL && (uintptr_t)a->cu_seqlens_q % 4 != 0) ||
        (a->cu_seqlens_k != NULL && (uintptr_t)a->cu_seqlens_k % 4 != 0))
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "cu_seqlens_q and cu_seqlens_k must be 4-byte aligned");
    if (a->cu_seqlens_k != NULL && a->block_table != NULL)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "cu_seqlens_k and block_table both say where the keys are: "
                         "give one (a paged cache's lengths are seqused_k)");
    if (a->total_q < 0 || a->total_k < 0 || (a->total_q > 0 && a->cu_seqlens_q == NULL) ||
        (a->total_k > 0 && a->cu_seqlens_k == NULL))
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "total_q and total_k are the rows of packed tensors: "
                         "non-negative, and given only with cu_seqlens_q and cu_seqlens_k");
    if ((a->total_q > 0 && a->total_q < a->seqlen_q) || (a->total_k > 0 && a->total_k < a->seqlen_k)) {
        snprintf(msg, sizeof msg, "total_q and total_k (%d, %d) cannot be fewer than the longest sequence's "
                 "rows (seqlen_q %d, seqlen_k %d)", a->total_q, a->total_k, a->seqlen_q, a->seqlen_k);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (a->block_table == NULL) {
        if (a->page_size != 0 || a->block_table_stride != 0)
            return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "page_size and block_table_stride are set but block_table "
                             "is NULL");
        return FT_OK;
    }
    if ((uintptr_t)a->block_table % 4 != 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "block_table is not 4-byte aligned");
    if (a->page_size <= 0 || a->page_size % 16 != 0) {
        snprintf(msg, sizeof msg, "page_size (%d) must be a positive multiple of 16", a->page_size);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (a->block_table_stride <= 0 ||
        (long long)a->block_table_stride * a->page_size < (long long)a->seqlen_k) {
        snprintf(msg, sizeof msg, "block_table_stride (%d) pages of %d keys cannot hold seqlen_k (%d) keys",
                 a->block_table_stride, a->page_size, a->seqlen_k);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    return FT_OK;
}

/* Checks a forward call's arguments and finds (the first time: builds) its kernel, with the
 * calling thread's CUDA context made the device's primary one. what names the API call in
 * messages. */
static ft_status kernel_for_call(ft_context *ctx, const ft_attention_args *given, ft_attention_args *a,
                                 const char *what, const kernel_slot **out)
{
    ft_problem p;
    ft_status rc;
    ft_err err;
    char msg[256];

    *out = NULL;
    if (ctx == NULL || given == NULL) {
        snprintf(msg, sizeof msg, "%s: ctx and args must not be NULL", what);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    rc = ft__attention_args_read(given, a, &err);
    if (rc != FT_OK)
        return set_error(ctx, rc, err.msg);
    ft__fwd_args_problem(a, &p);
    if ((rc = check_problem(ctx, a->dtype, &p)) != FT_OK || (rc = check_tensor(ctx, "q", a->q, a->q_stride)) != FT_OK ||
        (rc = check_tensor(ctx, "k", a->k, a->k_stride)) != FT_OK ||
        (rc = check_tensor(ctx, "v", a->v, a->v_stride)) != FT_OK ||
        (rc = check_tensor(ctx, "o", a->o, a->o_stride)) != FT_OK)
        return rc;
    if (a->lse != NULL && (uintptr_t)a->lse % 4 != 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "lse is not 4-byte aligned");
    if ((rc = check_kv_cache(ctx, a)) != FT_OK)
        return rc;
    return slot_for_call(ctx, &ft__op_fwd, &p, ft__args_needs(a), out);
}

ft_status ft_attention_kernel(ft_context *ctx, const ft_attention_args *given, char *buf, size_t cap)
{
    const kernel_slot *slot;
    ft_attention_args a;
    ft_status rc;

    if (buf == NULL || cap == 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "ft_attention_kernel: buf must hold at least one byte");
    buf[0] = '\0';
    rc = kernel_for_call(ctx, given, &a, "ft_attention_kernel", &slot);
    if (rc == FT_OK)
        snprintf(buf, cap, "%s", slot->how);
    return rc;
}

ft_status ft_attention_forward(ft_context *ctx, const ft_attention_args *given, void *stream)
{
    const kernel_slot *slot;
    ft_attention_args args, *a = &args;
    ft_fwd_params p;
    ft_status rc;
    ft_err err;

    rc = kernel_for_call(ctx, given, &args, "ft_attention_forward", &slot);
    if (rc != FT_OK)
        return rc;

    memset(&p, 0, sizeof p);
    p.q = a->q, p.k = a->k, p.v = a->v, p.o = a->o, p.lse = a->lse;
    p.q_batch_stride = a->q_stride[0], p.q_row_stride = a->q_stride[1], p.q_head_stride = a->q_stride[2];
    p.k_batch_stride = a->k_stride[0], p.k_row_stride = a->k_stride[1], p.k_head_stride = a->k_stride[2];
    p.v_batch_stride = a->v_stride[0], p.v_row_stride = a->v_stride[1], p.v_head_stride = a->v_stride[2];
    p.o_batch_stride = a->o_stride[0], p.o_row_stride = a->o_stride[1], p.o_head_stride = a->o_stride[2];
    p.batch = a->batch, p.heads_q = a->heads_q, p.heads_kv = a->heads_kv;
    p.seqlen_q = a->seqlen_q, p.seqlen_k = a->seqlen_k;
    p.scale = a->softmax_scale > 0 ? a->softmax_scale : 1.0f / sqrtf((float)a->head_dim);
    p.scale_log2 = p.scale * 1.4426950408889634f;
    if (a->workspace != NULL && (uintptr_t)a->workspace % 16 != 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "workspace is not 16-byte aligned");
    p.ws = a->workspace, p.ws_bytes = a->workspace != NULL ? (int64_t)a->workspace_bytes : 0;
    p.seqused_k = a->seqused_k, p.block_table = a->block_table;
    p.page_size = a->page_size, p.block_table_stride = a->block_table_stride;
    p.cu_seqlens_q = a->cu_seqlens_q, p.cu_seqlens_k = a->cu_seqlens_k;
    p.total_q = a->cu_seqlens_q != NULL ? a->total_q : 0, p.total_k = a->cu_seqlens_k != NULL ? a->total_k : 0;
    rc = ft__kernel_launch_fwd(ctx->session.cu, &slot->k, &p, (CUstream)stream, &err);
    if (rc != FT_OK)
        return set_error(ctx, rc, err.msg);
    return FT_OK;
}

ft_status ft_attention_forward_workspace_size(ft_context *ctx, const ft_attention_args *given, size_t *bytes)
{
    const kernel_slot *slot;
    ft_attention_args a;
    ft_problem p;
    ft_status rc;
    ft_err err;

    if (bytes == NULL)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "ft_attention_forward_workspace_size: bytes is NULL");
    *bytes = 0;
    rc = kernel_for_call(ctx, given, &a, "ft_attention_forward_workspace_size", &slot);
    if (rc != FT_OK)
        return rc;
    ft__fwd_args_problem(&a, &p);
    rc = ft__kernel_fwd_workspace(&slot->k, &p, bytes, &err);
    return rc != FT_OK ? set_error(ctx, rc, err.msg) : FT_OK;
}

/* ---- the backward ---- */

/* Checks a backward call's arguments and finds (the first time: builds) its kernel, like
 * kernel_for_call; its problem goes to p. */
static ft_status bwd_kernel_for_call(ft_context *ctx, const ft_attention_bwd_args *given, ft_attention_bwd_args *a,
                                     ft_problem *p, const char *what, const kernel_slot **out)
{
    struct {
        const char *name;
        const void *ptr;
        const int64_t *stride;
        int q_side;
    } t[8];
    ft_tensor_view view[8];
    ft_status rc;
    ft_err err;
    char msg[256];
    int i, j;

    *out = NULL;
    if (ctx == NULL || given == NULL) {
        snprintf(msg, sizeof msg, "%s: ctx and args must not be NULL", what);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    rc = ft__attention_bwd_args_read(given, a, &err);
    if (rc != FT_OK)
        return set_error(ctx, rc, err.msg);
    ft__bwd_args_problem(a, p);
    if ((rc = check_problem(ctx, a->dtype, p)) != FT_OK)
        return rc;
#define T(i, n, f, q) (t[i].name = n, t[i].ptr = a->f, t[i].stride = a->f##_stride, t[i].q_side = q)
    T(0, "q", q, 1), T(1, "k", k, 0), T(2, "v", v, 0), T(3, "o", o, 1), T(4, "dout", dout, 1);
    T(5, "dq", dq, 1), T(6, "dk", dk, 0), T(7, "dv", dv, 0); /* the outputs: 5, 6, 7 */
#undef T
    for (i = 0; i < 8; i++) {
        if ((rc = check_tensor(ctx, t[i].name, t[i].ptr, t[i].stride)) != FT_OK)
            return rc;
        view[i].addr = (uintptr_t)t[i].ptr;
        memcpy(view[i].stride, t[i].stride, sizeof view[i].stride);
        view[i].n[0] = p->batch;
        view[i].n[1] = t[i].q_side ? p->seqlen_q : p->seqlen_k;
        view[i].n[2] = t[i].q_side ? p->heads_q : p->heads_kv;
        view[i].head_dim = p->head_dim;
    }
    for (i = 5; i < 8; i++)
        for (j = 0; j < 8; j++)
            if (j != i && ft__tensors_may_alias(&view[i], &view[j])) {
                snprintf(msg, sizeof msg, "%s overlaps %s: the gradients must not share memory with the inputs or "
                         "each other", t[i].name, t[j].name);
                return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
            }
    if (a->lse == NULL || (uintptr_t)a->lse % 4 != 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "lse (the forward's, fp32) is NULL or not 4-byte aligned");
    return slot_for_call(ctx, &ft__op_bwd, p, 0, out);
}

/* The backward operation's launch plan of a call by the slot's kernel. */
static ft_status bwd_plan(const ft_context *ctx, const kernel_slot *slot, const ft_problem *p, ft_launch_plan *plan)
{
    ft_err err;
    ft_status rc = ft__op_bwd.plan(&slot->k.facts, p, plan, &err);
    return rc == FT_OK ? FT_OK : set_error(ctx, rc, err.msg);
}

ft_status ft_attention_backward_workspace_size(ft_context *ctx, const ft_attention_bwd_args *given, size_t *bytes)
{
    const kernel_slot *slot;
    ft_attention_bwd_args a;
    ft_launch_plan plan;
    ft_problem p;
    ft_status rc;

    if (bytes == NULL)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "ft_attention_backward_workspace_size: bytes is NULL");
    *bytes = 0;
    rc = bwd_kernel_for_call(ctx, given, &a, &p, "ft_attention_backward_workspace_size", &slot);
    if (rc == FT_OK)
        rc = bwd_plan(ctx, slot, &p, &plan);
    if (rc == FT_OK)
        *bytes = plan.workspace_bytes;
    return rc;
}

ft_status ft_attention_backward_kernel(ft_context *ctx, const ft_attention_bwd_args *given, char *buf, size_t cap)
{
    const kernel_slot *slot;
    ft_attention_bwd_args a;
    ft_problem p;
    ft_status rc;

    if (buf == NULL || cap == 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "ft_attention_backward_kernel: buf must hold at least one byte");
    buf[0] = '\0';
    rc = bwd_kernel_for_call(ctx, given, &a, &p, "ft_attention_backward_kernel", &slot);
    if (rc == FT_OK)
        snprintf(buf, cap, "%s", slot->how);
    return rc;
}

ft_status ft_attention_backward(ft_context *ctx, const ft_attention_bwd_args *given, void *workspace,
                                size_t workspace_bytes, void *stream)
{
    const kernel_slot *slot;
    ft_attention_bwd_args args, *a = &args;
    ft_launch_plan plan;
    ft_bwd_params bp;
    ft_problem p;
    ft_status rc;
    ft_err err;
    char msg[256];

    rc = bwd_kernel_for_call(ctx, given, &args, &p, "ft_attention_backward", &slot);
    if (rc == FT_OK)
        rc = bwd_plan(ctx, slot, &p, &plan);
    if (rc != FT_OK)
        return rc;
    if (plan.workspace_bytes > 0 && (workspace == NULL || workspace_bytes < plan.workspace_bytes ||
                                     (uintptr_t)workspace % 256 != 0)) {
        snprintf(msg, sizeof msg, "the workspace must be %zu bytes or more, 256-byte aligned (given %zu bytes at %p; "
                 "ft_attention_backward_workspace_size says how many)", plan.workspace_bytes, workspace_bytes,
                 workspace);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    memset(&bp, 0, sizeof bp);
    bp.q = a->q, bp.k = a->k, bp.v = a->v, bp.o = a->o, bp.dout = a->dout;
    bp.dq = a->dq, bp.dk = a->dk, bp.dv = a->dv, bp.lse = a->lse, bp.ws = workspace;
#define STRIDES(f) (bp.f##_batch_stride = a->f##_stride[0], bp.f##_row_stride = a->f##_stride[1], \
                    bp.f##_head_stride = a->f##_stride[2])
    STRIDES(q), STRIDES(k), STRIDES(v), STRIDES(o), STRIDES(dout), STRIDES(dq), STRIDES(dk), STRIDES(dv);
#undef STRIDES
    bp.batch = a->batch, bp.heads_q = a->heads_q, bp.heads_kv = a->heads_kv;
    bp.seqlen_q = a->seqlen_q, bp.seqlen_k = a->seqlen_k;
    bp.scale = ft__problem_scale(&p);
    bp.scale_log2 = bp.scale * 1.4426950408889634f;
    rc = ft__kernel_run_plan(ctx->session.cu, &slot->k, &plan, &bp, (CUdeviceptr)(uintptr_t)workspace,
                             (CUstream)stream, &err);
    return rc == FT_OK ? FT_OK : set_error(ctx, rc, err.msg);
}
