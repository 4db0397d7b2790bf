/*
 * The public runtime: contexts and ft_attention_forward.
 *
 * A context keeps a small table of loaded kernels keyed by (head dim, dtype, causal). The
 * first call for a key builds its kernel (generate, compile through the cache, load) under
 * the context's lock; later calls find it in the table and only launch: no compilation, no
 * allocation, no file access on that path.
 */
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtune.h"
#include "common/fs.h"
#include "common/strbuf.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/dispatch.h"
#include "tuner/session.h"
#include "tuning_db/db.h"

#define MAX_KERNELS 512

/* Scratch for the nearest-bucket search: the winners' buckets of one (dtype, d, causal). */
typedef struct nearest_ctx {
    long long device_id;
    ft_db_bucket buckets[256];
    int n;
} nearest_ctx;

typedef struct kernel_slot {
    ft_db_bucket bucket;
    int bf16;
    ft_status status; /* FT_OK: k is loaded; otherwise why this key has no kernel */
    ft_kernel k;
    char error[512];
} kernel_slot;

struct ft_context {
    ft_session session;
    ft_spec *spec;
    char *variant;             /* forced (partial) variant, or NULL */
    ft_db *db;                 /* tuning database, or NULL */
    long long device_id;       /* this GPU in db, or -1 */
    pthread_mutex_t lock;      /* guards the slots and nearest */
    nearest_ctx nearest;
    int nslots;
    kernel_slot slots[MAX_KERNELS];
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
    ft_db_device dev;
    const ft_cuda *cu = ctx->session.cu;
    CUdevice d;
    int l2 = 0, major = 0, minor = 0;
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
    memset(&dev, 0, sizeof dev);
    cu->p_cuDeviceGet(&d, ctx->session.device);
    cu->p_cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d);
    snprintf(dev.name, sizeof dev.name, "%s", ctx->session.arch.device_name);
    dev.cc = ctx->session.arch.cc;
    dev.sms = ctx->session.arch.sms;
    dev.smem_per_block = ctx->session.arch.smem_per_block;
    dev.smem_per_sm = ctx->session.arch.smem_per_sm;
    dev.l2_bytes = l2;
    dev.driver_version = cu->driver_version;
    ft__nvrtc_version(&major, &minor, NULL);
    snprintf(dev.nvrtc_version, sizeof dev.nvrtc_version, "%d.%d", major, minor);
    rc = ft__db_device_id(ctx->db, &dev, &ctx->device_id, err);
    if (rc == FT_ERR_NOT_FOUND) { /* nothing tuned for this GPU, driver or NVRTC */
        ctx->device_id = -1;
        rc = FT_OK;
    }
    return rc;
}

void ft_context_options_init(ft_context_options *o)
{
    memset(o, 0, sizeof *o);
    o->version = FT_OPTIONS_VERSION;
}

ft_status ft_context_create(const ft_context_options *options, ft_context **out)
{
    ft_context_options defaults;
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
    if (options->version != FT_OPTIONS_VERSION)
        return set_error(NULL, FT_ERR_INVALID_ARGUMENT,
                         "ft_context_create: options were not set up by ft_context_options_init");
    ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return set_error(NULL, FT_ERR_OUT_OF_MEMORY, "ft_context_create: out of memory");
    pthread_mutex_init(&ctx->lock, NULL);
    rc = ft__spec_load_default(options->spec, &ctx->spec, &err);
    if (rc == FT_OK && options->variant != NULL) {
        ft_variant v;
        unsigned mask;
        ctx->variant = ft__strdup(options->variant);
        rc = ctx->variant == NULL ? ft__fail(&err, FT_ERR_OUT_OF_MEMORY, "out of memory")
                                  : ft__variant_filter_parse(ctx->spec, options->variant, &v, &mask, &err);
    }
    if (rc == FT_OK)
        rc = ft__session_open(options->device, options->cache_dir, 0, &ctx->session, &err);
    if (rc == FT_OK)
        rc = open_database(ctx, options->database, &err);
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
    ft__spec_free(ctx->spec);
    free(ctx->variant);
    pthread_mutex_destroy(&ctx->lock);
    if (error_ctx == ctx)
        error_ctx = NULL;
    free(ctx);
}

/* The built-in choice per head dim when nothing better is known: the variant that won most
 * of the head dim's buckets in a full tune of the default spec on an H200 (2026-11-30). */
static const char *default_variant(int head_dim)
{
    switch (head_dim) {
    case 32: return "bm=128,bn=128,warps=4,stages=2,qreg=0,overlap=0";
    case 64: return "bm=128,bn=128,warps=4,stages=1,qreg=0,overlap=0";
    case 96: return "bm=128,bn=64,warps=4,stages=1,qreg=0,overlap=0";
    case 128: return "bm=128,bn=64,warps=4,stages=1,qreg=0,overlap=0";
    case 192: return "bm=64,bn=64,warps=4,stages=1,qreg=0,overlap=0";
    case 256: return "bm=64,bn=64,warps=4,stages=1,qreg=0,overlap=0";
    }
    return NULL;
}

static int collect_bucket(void *ud, const ft_db_row *row)
{
    nearest_ctx *c = ud;
    if (row->result.device_id == c->device_id && row->winner && c->n < 256)
        c->buckets[c->n++] = row->result.bucket;
    return 0;
}

/* Loads the database's winner for the slot's bucket, or for the nearest tuned bucket.
 * Returns 1 when a kernel was loaded; 0 to fall back (why in how). */
static int load_tuned(ft_context *ctx, kernel_slot *slot, char *how, size_t cap)
{
    ft_db_bucket want = slot->bucket;
    ft_db_row row;
    void *cubin = NULL;
    size_t size = 0;
    int found = 0, ok = 0;
    ft_err err;
    ft_variant v;
    ft_kernel_source src;

    memset(&src, 0, sizeof src);
    if (ft__db_winner(ctx->db, ctx->device_id, &want, &row, &cubin, &size, &found, &err) != FT_OK) {
        snprintf(how, cap, "database: %s", err.msg);
        return 0;
    }
    if (found) {
        snprintf(how, cap, "tuned for this bucket");
    } else {
        nearest_ctx *nc = &ctx->nearest;
        ft_db_filter f;
        int pick;
        memset(nc, 0, sizeof *nc);
        nc->device_id = ctx->device_id;
        ft__db_filter_init(&f);
        f.dtype = want.dtype;
        f.head_dim = want.head_dim;
        f.causal = want.causal;
        f.winners_only = 1;
        if (ft__db_query(ctx->db, &f, collect_bucket, nc, &err) != FT_OK) {
            snprintf(how, cap, "database: %s", err.msg);
            return 0;
        }
        pick = ft__nearest_bucket(&want, nc->buckets, nc->n);
        if (pick < 0) {
            snprintf(how, cap, "nothing tuned for %s d=%d causal=%d", want.dtype, want.head_dim, want.causal);
            return 0;
        }
        if (ft__db_winner(ctx->db, ctx->device_id, &nc->buckets[pick], &row, &cubin, &size, &found, &err) != FT_OK ||
            !found) {
            snprintf(how, cap, "database: %s", found ? err.msg : "the nearest bucket lost its winner");
            return 0;
        }
        snprintf(how, cap, "tuned for the nearest bucket (seqlen <= %d, b*h <= %d)", nc->buckets[pick].seqlen_bucket,
                 nc->buckets[pick].bh_bucket);
    }
    if (cubin == NULL)
        snprintf(how, cap, "the winner %s has no stored cubin", row.variant);
    else if (ft__variant_parse(ctx->spec, row.variant, &v, &err) != FT_OK ||
             ft__emit(ctx->spec, ft__family_find(ctx->spec->template_name), &v, &ctx->session.arch, &src, &err) !=
                 FT_OK ||
             ft__session_load(&ctx->session, ctx->spec, &v, cubin, src.entry, src.smem_dynamic, src.threads,
                              &slot->k, &err) != FT_OK)
        snprintf(how, cap, "the winner %s cannot be used: %s", row.variant, err.msg);
    else {
        ok = 1;
        snprintf(how + strlen(how), cap - strlen(how), ": %s", row.variant);
    }
    ft__kernel_source_free(&src);
    free(cubin);
    return ok;
}

/* Builds the kernel of a slot (under the context's lock): the forced variant, else the tuned
 * winner, else the built-in default, compiled through the cache. */
static void build_slot(ft_context *ctx, kernel_slot *slot)
{
    const int head_dim = slot->bucket.head_dim, causal = slot->bucket.causal;
    const char *base = ctx->variant != NULL ? ctx->variant : default_variant(head_dim);
    char text[1024], how[700] = "";
    ft_variant v;
    unsigned mask;
    ft_err err;
    int n;

    if (ctx->variant == NULL && ctx->db != NULL && ctx->device_id >= 0 && load_tuned(ctx, slot, how, sizeof how)) {
        slot->status = FT_OK;
        goto out;
    }
    if (base == NULL) {
        slot->status = FT_ERR_UNSUPPORTED;
        snprintf(slot->error, sizeof slot->error, "no kernel for head dim %d (flashtune has 32, 64, 96, 128, 192, 256)",
                 head_dim);
        goto out;
    }
    slot->status = ft__variant_filter_parse(ctx->spec, base, &v, &mask, &err);
    n = snprintf(text, sizeof text, "%s", base);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(ctx->spec, "d"))))
        n += snprintf(text + n, sizeof text - (size_t)n, ",d=%d", head_dim);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(ctx->spec, "causal"))))
        n += snprintf(text + n, sizeof text - (size_t)n, ",causal=%d", causal);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(ctx->spec, "dtype"))))
        snprintf(text + n, sizeof text - (size_t)n, ",dtype=%s", slot->bf16 ? "bf16" : "f16");
    if (slot->status == FT_OK)
        slot->status = ft__variant_parse(ctx->spec, text, &v, &err);
    if (slot->status == FT_OK) {
        ft_problem p;
        memset(&p, 0, sizeof p);
        ft__variant_problem(ctx->spec, &v, &p);
        if (p.head_dim != head_dim || p.causal != causal || p.bf16 != slot->bf16)
            slot->status = ft__fail(&err, FT_ERR_UNSUPPORTED, "the forced variant '%s' does not compute this call "
                                    "(d=%d, causal=%d, %s)", ctx->variant, head_dim, causal,
                                    slot->bf16 ? "bf16" : "f16");
    }
    if (slot->status == FT_OK)
        slot->status = ft__session_build(&ctx->session, ctx->spec, &v, &slot->k, NULL, &err);
    if (slot->status != FT_OK)
        snprintf(slot->error, sizeof slot->error, "%s", err.msg);
    else
        snprintf(how + strlen(how), sizeof how - strlen(how), "%s%s: %s", how[0] ? "; " : "",
                 ctx->variant != NULL ? "forced" : "built-in default", text);
out:
    if (getenv("FLASHTUNE_DEBUG") != NULL)
        fprintf(stderr, "flashtune: %s d=%d causal=%d seqlen<=%d b*h<=%d: %s\n", slot->bucket.dtype, head_dim,
                causal, slot->bucket.seqlen_bucket, slot->bucket.bh_bucket,
                slot->status == FT_OK ? how : slot->error);
}

static const kernel_slot *find_kernel(ft_context *ctx, const ft_db_bucket *b)
{
    kernel_slot *slot = NULL;
    int i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nslots; i++) {
        const ft_db_bucket *s = &ctx->slots[i].bucket;
        if (s->head_dim == b->head_dim && s->causal == b->causal && s->seqlen_bucket == b->seqlen_bucket &&
            s->bh_bucket == b->bh_bucket && strcmp(s->dtype, b->dtype) == 0) {
            slot = &ctx->slots[i];
            break;
        }
    }
    if (slot == NULL && ctx->nslots < MAX_KERNELS) {
        slot = &ctx->slots[ctx->nslots++];
        slot->bucket = *b;
        slot->bf16 = strcmp(b->dtype, "bf16") == 0;
        build_slot(ctx, slot);
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

ft_status ft_attention_forward(ft_context *ctx, const ft_attention_args *a, void *stream)
{
    const kernel_slot *slot;
    const ft_cuda *cu;
    CUcontext current = NULL;
    ft_fwd_params p;
    ft_status rc;
    ft_err err;
    char msg[256];

    if (ctx == NULL || a == NULL)
        return set_error(ctx, FT_ERR_INVALID_ARGUMENT, "ft_attention_forward: ctx and args must not be NULL");
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

    {
        ft_db_bucket b;
        ft__db_bucket(a->dtype == FT_BF16 ? "bf16" : "f16", a->head_dim, a->causal != 0, a->batch, a->heads_q,
                      a->seqlen_q, a->seqlen_k, &b);
        slot = find_kernel(ctx, &b);
    }
    if (slot == NULL)
        return set_error(ctx, FT_ERR_INTERNAL, "too many kinds of calls on one context");
    if (slot->status != FT_OK)
        return set_error(ctx, slot->status, slot->error);

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
    rc = ft__kernel_launch_fwd(cu, &slot->k, &p, (CUstream)stream, &err);
    if (rc != FT_OK)
        return set_error(ctx, rc, err.msg);
    return FT_OK;
}
