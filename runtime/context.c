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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtune.h"
#include "common/strbuf.h"
#include "generator/variant.h"
#include "tuner/session.h"

#define MAX_KERNELS 64

typedef struct kernel_slot {
    int head_dim, bf16, causal;
    ft_status status; /* FT_OK: k is loaded; otherwise why this key has no kernel */
    ft_kernel k;
    char error[512];
} kernel_slot;

struct ft_context {
    ft_session session;
    ft_spec *spec;
    char *variant;             /* forced (partial) variant, or NULL */
    pthread_mutex_t lock;
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

/* Builds the kernel of a slot (under the context's lock). */
static void build_slot(ft_context *ctx, kernel_slot *slot)
{
    const char *base = ctx->variant != NULL ? ctx->variant : default_variant(slot->head_dim);
    char text[1024];
    ft_variant v;
    unsigned mask;
    ft_err err;
    int n;

    if (base == NULL) {
        slot->status = FT_ERR_UNSUPPORTED;
        snprintf(slot->error, sizeof slot->error, "no kernel for head dim %d (flashtune has 32, 64, 96, 128, 192, 256)",
                 slot->head_dim);
        return;
    }
    slot->status = ft__variant_filter_parse(ctx->spec, base, &v, &mask, &err);
    n = snprintf(text, sizeof text, "%s", base);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(ctx->spec, "d"))))
        n += snprintf(text + n, sizeof text - (size_t)n, ",d=%d", slot->head_dim);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(ctx->spec, "causal"))))
        n += snprintf(text + n, sizeof text - (size_t)n, ",causal=%d", slot->causal);
    if (slot->status == FT_OK && !(mask & (1u << ft__spec_param_index(ctx->spec, "dtype"))))
        snprintf(text + n, sizeof text - (size_t)n, ",dtype=%s", slot->bf16 ? "bf16" : "f16");
    if (slot->status == FT_OK)
        slot->status = ft__variant_parse(ctx->spec, text, &v, &err);
    if (slot->status == FT_OK) {
        ft_problem p;
        memset(&p, 0, sizeof p);
        ft__variant_problem(ctx->spec, &v, &p);
        if (p.head_dim != slot->head_dim || p.causal != slot->causal || p.bf16 != slot->bf16)
            slot->status = ft__fail(&err, FT_ERR_UNSUPPORTED, "the forced variant '%s' does not compute this call "
                                    "(d=%d, causal=%d, %s)", ctx->variant, slot->head_dim, slot->causal,
                                    slot->bf16 ? "bf16" : "f16");
    }
    if (slot->status == FT_OK)
        slot->status = ft__session_build(&ctx->session, ctx->spec, &v, &slot->k, NULL, &err);
    if (slot->status != FT_OK)
        snprintf(slot->error, sizeof slot->error, "%s", err.msg);
}

static const kernel_slot *find_kernel(ft_context *ctx, int head_dim, int bf16, int causal)
{
    kernel_slot *slot = NULL;
    int i;

    pthread_mutex_lock(&ctx->lock);
    for (i = 0; i < ctx->nslots; i++) {
        kernel_slot *s = &ctx->slots[i];
        if (s->head_dim == head_dim && s->bf16 == bf16 && s->causal == causal) {
            slot = s;
            break;
        }
    }
    if (slot == NULL && ctx->nslots < MAX_KERNELS) {
        slot = &ctx->slots[ctx->nslots++];
        slot->head_dim = head_dim;
        slot->bf16 = bf16;
        slot->causal = causal;
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

    slot = find_kernel(ctx, a->head_dim, a->dtype == FT_BF16, a->causal != 0);
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
