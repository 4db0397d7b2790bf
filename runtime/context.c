/*
 * The public runtime: contexts and ft_attention_forward.
 *
 * A context keeps a small table of loaded kernels keyed by the call's key (ops/op.h: dtype,
 * head dim, causality, sequence-length and batch·heads buckets). The first call for a key
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
#include "common/strbuf.h"
#include "generator/family.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/args.h"
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
    ft_spec *more[4];          /* with options->spec NULL: the other built-in specs whose kernels
                                  run on this GPU (flash_fwd_sm90 on compute capability 9.0) */
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
    const char *env = getenv("FLASHTUNE_RECORD_MISSES");

    if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0 || (database != NULL && database[0] == '\0'))
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
static void record_miss(ft_context *ctx, const kernel_slot *slot, const ft_attention_args *a)
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
        m.batch = a->batch, m.heads_q = a->heads_q, m.heads_kv = a->heads_kv;
        m.seqlen_q = a->seqlen_q, m.seqlen_k = a->seqlen_k;
        snprintf(m.fallback, sizeof m.fallback, "%s", slot->fallback);
        rc = ft__db_record_miss(ctx->miss_db, &m, &err);
    }
    if (rc != FT_OK) {
        fprintf(stderr, "flashtune: FLASHTUNE_RECORD_MISSES: %s; no more misses are recorded\n", err.msg);
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
    if (getenv("FLASHTUNE_DEBUG") != NULL &&
        (strcmp(s->device_name, ctx->dev.name) != 0 || s->driver_version != ctx->dev.driver_version))
        fprintf(stderr, "flashtune: the %s was tuned on %s (driver %d); this GPU is %s (driver %d): using it anyway\n",
                ctx->pack != NULL ? "pack" : "kernel set", s->device_name, s->driver_version, ctx->dev.name,
                ctx->dev.driver_version);
    return FT_OK;
}

/* The built-in specs after the default one whose kernel family runs on the context's GPU. */
static ft_status load_more_specs(ft_context *ctx, ft_err *err)
{
    ft_status rc = FT_OK;
    int i;

    for (i = 1; ft__builtin_specs[i].name != NULL && ctx->nmore < (int)(sizeof ctx->more / sizeof ctx->more[0]);
         i++) {
        ft_spec *spec = NULL;
        const ft_family *fam;
        char why[256];

        rc = ft__spec_load_builtin(i, &spec, err);
        if (rc != FT_OK)
            break;
        fam = ft__family_find(spec->template_name);
        if (fam != NULL && ft__family_supports_arch(fam, &ctx->session.arch, why, sizeof why))
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
        rc = ft__spec_check_op(ctx->spec, &ft__op_fwd, "ft_attention_forward runs", &err);
    if (rc == FT_OK && options->variant != NULL) {
        ft_variant v;
        unsigned mask;
        ctx->variant = ft__strdup(options->variant);
        rc = ctx->variant == NULL ? ft__fail(&err, FT_ERR_OUT_OF_MEMORY, "out of memory")
                                  : ft__variant_filter_parse(ctx->spec, options->variant, &v, &mask, &err);
    }
    if (rc == FT_OK)
        rc = ft__session_open(options->device, options->cache_dir, 0, &ctx->session, &err);
    if (rc == FT_OK && options->spec == NULL)
        rc = load_more_specs(ctx, &err);
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

/* The built-in choice per kernel family, head dim and causality (-1: either) when nothing
 * better is known: the variant that won most of the head dim's buckets in a full tune of the
 * family's spec on an H200 (2026-11-30; sm90 d=96 and 192 from the earlier tune, without the
 * balance knob). The first entry whose family the context has wins: the sm_90a family's where
 * it runs. */
static const struct default_kernel {
    const char *family;
    int head_dim;
    int causal;
    const char *variant;
} defaults[] = {
    {"flash_fwd_sm90", 64, 0, "bm=128,bn=176,stages=3,pingpong=0,overlap=1,balance=0"},
    {"flash_fwd_sm90", 64, 1, "bm=128,bn=192,stages=2,pingpong=1,overlap=1,balance=1"},
    {"flash_fwd_sm90", 96, -1, "bm=128,bn=128,stages=2,pingpong=1,overlap=1,balance=0"},
    {"flash_fwd_sm90", 128, 0, "bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=0"},
    {"flash_fwd_sm90", 128, 1, "bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=1"},
    {"flash_fwd_sm90", 192, -1, "bm=128,bn=96,stages=2,pingpong=1,overlap=1,balance=0"},
    {"flash_fwd_sm90", 256, 0, "bm=128,bn=80,stages=2,pingpong=0,overlap=1,balance=0"},
    {"flash_fwd_sm90", 256, 1, "bm=128,bn=80,stages=2,pingpong=1,overlap=1,balance=1"},
    {"flash_fwd_sm80", 32, -1, "bm=128,bn=128,warps=4,stages=2,qreg=0,overlap=0"},
    {"flash_fwd_sm80", 64, -1, "bm=128,bn=128,warps=4,stages=1,qreg=0,overlap=0"},
    {"flash_fwd_sm80", 96, -1, "bm=128,bn=64,warps=4,stages=1,qreg=0,overlap=0"},
    {"flash_fwd_sm80", 128, -1, "bm=128,bn=64,warps=4,stages=1,qreg=0,overlap=0"},
    {"flash_fwd_sm80", 192, -1, "bm=64,bn=64,warps=4,stages=1,qreg=0,overlap=0"},
    {"flash_fwd_sm80", 256, -1, "bm=64,bn=64,warps=4,stages=1,qreg=0,overlap=0"},
};

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

/* The built-in default for a head dim and causality: its variant text and spec; NULL when none. */
static const char *default_variant(const ft_context *ctx, int head_dim, int causal, ft_spec **spec)
{
    size_t i;

    for (i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (defaults[i].head_dim == head_dim && (defaults[i].causal < 0 || defaults[i].causal == causal) &&
            (*spec = spec_of_family(ctx, defaults[i].family)) != NULL)
            return defaults[i].variant;
    return NULL;
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
    char why[400];
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
        snprintf(how, cap, "tuned for the nearest bucket (seqlen <= %lld, b*h <= %lld)",
                 ft__key_get(&nc->keys[pick], "seqlen", 0), ft__key_get(&nc->keys[pick], "bh", 0));
    }
    spec = spec_of_family(ctx, row.family);
    if (cubin == NULL)
        snprintf(how, cap, "the winner %s has no stored cubin", row.variant);
    else if (spec == NULL)
        snprintf(how, cap, "the winner %s is of family %s, which this context does not load", row.variant,
                 row.family);
    else if (ft__variant_parse(spec, row.variant, &v, &err) != FT_OK ||
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
    else
        snprintf(how, cap, "%s, tuned for the nearest bucket (seqlen <= %lld, b*h <= %lld): %s",
                 ctx->pack != NULL ? "pack" : "kernel set", ft__key_get(got, "seqlen", 0), ft__key_get(got, "bh", 0),
                 e->variant != NULL ? e->variant : e->entry);
    return 1;
}

/* Builds the kernel of a slot (under the context's lock): the forced variant, else the tuned
 * winner, else the built-in default, compiled through the cache. */
static void build_slot(ft_context *ctx, kernel_slot *slot)
{
    const int head_dim = (int)ft__key_get(&slot->key, "d", 0), causal = (int)ft__key_get(&slot->key, "causal", 0);
    ft_spec *spec = ctx->spec;
    const char *base = ctx->variant != NULL ? ctx->variant : default_variant(ctx, head_dim, causal, &spec);
    char text[1024], *how = slot->how;
    const size_t how_cap = sizeof slot->how;
    ft_variant v;
    unsigned mask;
    ft_err err;
    int n;

    how[0] = '\0';
    if (ctx->variant == NULL && ctx->kset != NULL && load_from_set(ctx, slot, how, how_cap)) {
        slot->status = FT_OK;
        goto out;
    }
    if (ctx->variant == NULL && ctx->db != NULL && ctx->device_id >= 0 && load_tuned(ctx, slot, how, how_cap)) {
        slot->status = FT_OK;
        goto out;
    }
    if (base == NULL) {
        slot->status = FT_ERR_UNSUPPORTED;
        snprintf(slot->error, sizeof slot->error, "no kernel for head dim %d (flashtune has 32, 64, 96, 128, 192, 256)",
                 head_dim);
        goto out;
    }
    slot->status = ft__variant_filter_parse(spec, base, &v, &mask, &err);
    n = snprintf(text, sizeof text, "%s", base);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(spec, "d"))))
        n += snprintf(text + n, sizeof text - (size_t)n, ",d=%d", head_dim);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(spec, "causal"))))
        n += snprintf(text + n, sizeof text - (size_t)n, ",causal=%d", causal);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(spec, "dtype"))))
        snprintf(text + n, sizeof text - (size_t)n, ",dtype=%s", slot->bf16 ? "bf16" : "f16");
    if (slot->status == FT_OK)
        slot->status = ft__variant_parse(spec, text, &v, &err);
    if (slot->status == FT_OK) {
        ft_problem p;
        memset(&p, 0, sizeof p);
        ft__variant_problem(spec, &v, &p);
        if (p.head_dim != head_dim || p.causal != causal || p.bf16 != slot->bf16)
            slot->status = ft__fail(&err, FT_ERR_UNSUPPORTED, "the forced variant '%s' does not compute this call "
                                    "(d=%d, causal=%d, %s)", ctx->variant, head_dim, causal,
                                    slot->bf16 ? "bf16" : "f16");
    }
    if (slot->status == FT_OK)
        slot->status = ft__session_build(&ctx->session, spec, &v, &slot->k, NULL, &err);
    if (slot->status != FT_OK)
        snprintf(slot->error, sizeof slot->error, "%s", err.msg);
    else
        snprintf(how + strlen(how), how_cap - strlen(how), "%s%s: %s", how[0] ? "; " : "",
                 ctx->variant != NULL ? "forced" : "built-in default", text);
    if (ctx->variant == NULL)
        slot->fallback = slot->status == FT_OK ? "default" : "failed";
out:
    if (getenv("FLASHTUNE_DEBUG") != NULL)
        fprintf(stderr, "flashtune: %s d=%d causal=%d seqlen<=%lld b*h<=%lld: %s\n", slot->key.dtype, head_dim,
                causal, ft__key_get(&slot->key, "seqlen", 0), ft__key_get(&slot->key, "bh", 0),
                slot->status == FT_OK ? how : slot->error);
}

static const kernel_slot *find_kernel(ft_context *ctx, const ft_key *key, const ft_attention_args *a)
{
    kernel_slot *slot = NULL;
    int i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nslots; i++) {
        if (ft__key_equal(&ctx->slots[i].key, key)) {
            slot = &ctx->slots[i];
            break;
        }
    }
    if (slot == NULL && ctx->nslots < MAX_KERNELS) {
        slot = &ctx->slots[ctx->nslots++];
        slot->key = *key;
        slot->bf16 = strcmp(key->dtype, "bf16") == 0;
        build_slot(ctx, slot);
        record_miss(ctx, slot, a);
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

/* Checks a call's arguments and finds (the first time: builds) its kernel, with the calling
 * thread's CUDA context made the device's primary one. what names the API call in messages. */
static ft_status kernel_for_call(ft_context *ctx, const ft_attention_args *given, ft_attention_args *a,
                                 const char *what, const kernel_slot **out)
{
    const kernel_slot *slot;
    const ft_cuda *cu;
    CUcontext current = NULL;
    ft_problem p;
    ft_key key;
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
    if (a->dtype != FT_F16 && a->dtype != FT_BF16)
        return set_error(ctx, FT_ERR_UNSUPPORTED, "dtype must be FT_F16 or FT_BF16");
    if (a->batch <= 0 || a->heads_q <= 0 || a->heads_kv <= 0 || a->seqlen_q <= 0 || a->seqlen_k <= 0 ||
        a->head_dim <= 0) {
        snprintf(msg, sizeof msg, "sizes must be positive (batch %d, heads %d/%d, seqlen %d/%d, head_dim %d)",
                 a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k, a->head_dim);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (a->heads_q % a->heads_kv != 0) {
        snprintf(msg, sizeof msg, "heads_q (%d) must be a multiple of heads_kv (%d)", a->heads_q, a->heads_kv);
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, msg);
    }
    if (!(a->softmax_scale >= 0) || a->softmax_scale > 1e30f)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "softmax_scale must be a positive number (0: 1/sqrt(d))");
    if ((rc = check_tensor(ctx, "q", a->q, a->q_stride)) != FT_OK ||
        (rc = check_tensor(ctx, "k", a->k, a->k_stride)) != FT_OK ||
        (rc = check_tensor(ctx, "v", a->v, a->v_stride)) != FT_OK ||
        (rc = check_tensor(ctx, "o", a->o, a->o_stride)) != FT_OK)
        return rc;
    if (a->lse != NULL && (uintptr_t)a->lse % 4 != 0)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "lse is not 4-byte aligned");

    cu = ctx->session.cu;
    cu->p_cuCtxGetCurrent(&current);
    if (current == NULL)
        cu->p_cuCtxSetCurrent(ctx->session.ctx);
    else if (current != ctx->session.ctx)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT,
                         "the calling thread's current CUDA context is not the primary context of this "
                         "flashtune context's device");

    memset(&p, 0, sizeof p);
    p.batch = a->batch, p.heads_q = a->heads_q, p.heads_kv = a->heads_kv;
    p.seqlen_q = a->seqlen_q, p.seqlen_k = a->seqlen_k, p.head_dim = a->head_dim;
    p.causal = a->causal != 0, p.bf16 = a->dtype == FT_BF16, p.scale = a->softmax_scale;
    ft__op_fwd.key(&p, &key);
    slot = find_kernel(ctx, &key, a);
    if (slot == NULL)
        return set_error(ctx, FT_ERR_INTERNAL, "too many kinds of calls on one context");
    if (slot->status != FT_OK)
        return set_error(ctx, slot->status, slot->error);
    *out = slot;
    return FT_OK;
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
    rc = ft__kernel_launch_fwd(ctx->session.cu, &slot->k, &p, (CUstream)stream, &err);
    if (rc != FT_OK)
        return set_error(ctx, rc, err.msg);
    return FT_OK;
}
