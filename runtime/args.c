#include "runtime/args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"

/* The bytes of a structure of version 2 or later: its fields, none of a later version's. */
static size_t args_size(int version)
{
    return version == 2   ? FT_ARGS_V2_SIZE
           : version == 3 ? FT_ARGS_V3_SIZE
           : version == 4 ? FT_ARGS_V4_SIZE
                          : sizeof(ft_attention_args);
}

ft_status ft__attention_args_read(const ft_attention_args *in, ft_attention_args *out, ft_err *err)
{
    int first;

    memcpy(&first, in, sizeof first);
    if (first == FT_F16 || first == FT_BF16) {
        const ft_attention_args_v1 *a = (const ft_attention_args_v1 *)(const void *)in;
        ft_attention_args_init(out);
        out->dtype = a->dtype;
        out->batch = a->batch, out->heads_q = a->heads_q, out->heads_kv = a->heads_kv;
        out->seqlen_q = a->seqlen_q, out->seqlen_k = a->seqlen_k, out->head_dim = a->head_dim;
        out->q = a->q, out->k = a->k, out->v = a->v, out->o = a->o, out->lse = a->lse;
        memcpy(out->q_stride, a->q_stride, sizeof out->q_stride);
        memcpy(out->k_stride, a->k_stride, sizeof out->k_stride);
        memcpy(out->v_stride, a->v_stride, sizeof out->v_stride);
        memcpy(out->o_stride, a->o_stride, sizeof out->o_stride);
        out->causal = a->causal;
        out->softmax_scale = a->softmax_scale;
        return FT_OK;
    }
    if (first < 2 || first > FT_ARGS_VERSION)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "the attention arguments have version %d: set them up with ft_attention_args_init "
                        "(this library reads versions 1 to %d)", first, FT_ARGS_VERSION);
    memset(out, 0, sizeof *out);
    memcpy(out, in, args_size(first));
    return FT_OK;
}

void ft_attention_args_init_version(ft_attention_args *a, int version)
{
    if (a == NULL || version < 2 || version > FT_ARGS_VERSION)
        return;
    memset(a, 0, args_size(version));
    a->version = version;
}

/* The sizes of a call as the forward operation reads them; 0 when they are not positive. */
static int call_problem(const ft_attention_args *given, ft_problem *p)
{
    ft_attention_args a;

    if (given == NULL || ft__attention_args_read(given, &a, NULL) != FT_OK)
        return 0;
    if (a.batch <= 0 || a.heads_q <= 0 || a.heads_kv <= 0 || a.seqlen_q <= 0 || a.seqlen_k <= 0 || a.head_dim <= 0)
        return 0;
    ft__fwd_args_problem(&a, p);
    return 1;
}

double ft_attention_flops(const ft_attention_args *args)
{
    ft_problem p;

    return call_problem(args, &p) ? ft__op_fwd.flops(&p) : 0.0;
}

ft_status ft_attention_key(const ft_attention_args *args, char *buf, size_t cap)
{
    ft_problem p;
    ft_key k;

    if (buf == NULL || cap == 0)
        return FT_ERR_INVALID_ARGUMENT;
    buf[0] = '\0';
    if (!call_problem(args, &p))
        return FT_ERR_INVALID_ARGUMENT;
    ft__op_fwd.key(&p, &k);
    ft__key_format(&k, buf, cap);
    return FT_OK;
}

ft_status ft__attention_bwd_args_read(const ft_attention_bwd_args *in, ft_attention_bwd_args *out, ft_err *err)
{
    if (in->version != FT_BWD_ARGS_VERSION)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "the backward's arguments have version %d: set them up with ft_attention_bwd_args_init "
                        "(this library reads version %d)", in->version, FT_BWD_ARGS_VERSION);
    *out = *in;
    return FT_OK;
}

void ft_attention_bwd_args_init_version(ft_attention_bwd_args *a, int version)
{
    if (a == NULL || version != FT_BWD_ARGS_VERSION)
        return;
    memset(a, 0, sizeof *a);
    a->version = version;
}

int ft__args_needs(const ft_attention_args *a)
{
    return ft__fwd_needs(a->seqused_k != NULL || a->block_table != NULL, a->cu_seqlens_q, a->total_q, a->cu_seqlens_k,
                         a->total_k);
}

void ft__fwd_args_problem(const ft_attention_args *a, ft_problem *p)
{
    memset(p, 0, sizeof *p);
    p->batch = a->batch, p->heads_q = a->heads_q, p->heads_kv = a->heads_kv;
    p->seqlen_q = a->seqlen_q, p->seqlen_k = a->seqlen_k, p->head_dim = a->head_dim;
    p->causal = a->causal != 0, p->bf16 = a->dtype == FT_BF16, p->scale = a->softmax_scale;
}

void ft__bwd_args_problem(const ft_attention_bwd_args *a, ft_problem *p)
{
    memset(p, 0, sizeof *p);
    p->batch = a->batch, p->heads_q = a->heads_q, p->heads_kv = a->heads_kv;
    p->seqlen_q = a->seqlen_q, p->seqlen_k = a->seqlen_k, p->head_dim = a->head_dim;
    p->causal = a->causal != 0, p->bf16 = a->dtype == FT_BF16, p->scale = a->softmax_scale;
    p->deterministic = a->deterministic != 0;
}

double ft_attention_backward_flops(const ft_attention_bwd_args *args)
{
    ft_attention_bwd_args a = {0};
    ft_problem p;

    if (args == NULL || ft__attention_bwd_args_read(args, &a, NULL) != FT_OK)
        return 0.0;
    if (a.batch <= 0 || a.heads_q <= 0 || a.heads_kv <= 0 || a.seqlen_q <= 0 || a.seqlen_k <= 0 || a.head_dim <= 0)
        return 0.0;
    ft__bwd_args_problem(&a, &p);
    return ft__op_bwd.flops(&p);
}

/* The bytes from a tensor's first element to just past its last. */
static uint64_t span_bytes(const ft_tensor_view *t)
{
    uint64_t e = (uint64_t)t->head_dim;
    int k;

    for (k = 0; k < 3; k++)
        e += (uint64_t)(t->n[k] - 1) * (uint64_t)t->stride[k];
    return 2 * e;
}

int ft__tensors_may_alias(const ft_tensor_view *a, const ft_tensor_view *b)
{
    const uint64_t sa = span_bytes(a), sb = span_bytes(b);
    int order[3] = {0, 1, 2}, i, j, nested = 1;
    int64_t reach, delta;

    if (a->addr >= b->addr + sb || b->addr >= a->addr + sa)
        return 0; /* the ranges do not meet */
    if (memcmp(a->stride, b->stride, sizeof a->stride) != 0 || memcmp(a->n, b->n, sizeof a->n) != 0 ||
        a->head_dim != b->head_dim || (a->addr - b->addr) % 2 != 0)
        return 1;
    /* dimensions by increasing stride; each must step past all that the smaller ones reach */
    for (i = 0; i < 3; i++)
        for (j = i + 1; j < 3; j++)
            if (a->stride[order[j]] < a->stride[order[i]]) {
                int t = order[i];
                order[i] = order[j], order[j] = t;
            }
    reach = a->head_dim;
    for (i = 0; i < 3 && nested; i++) {
        const int k = order[i];
        if (a->n[k] > 1) {
            nested = a->stride[k] >= reach;
            reach += (int64_t)(a->n[k] - 1) * a->stride[k];
        }
    }
    if (!nested)
        return 1;
    /* An element of b is one of a's iff the distance is a sum of index differences times the
     * strides (each difference under its size) plus less than a row: with nested strides, take
     * from the largest down the multiple nearest to what is left. */
    delta = ((int64_t)b->addr - (int64_t)a->addr) / 2;
    for (i = 2; i >= 0; i--) {
        const int k = order[i];
        int64_t m;
        if (a->n[k] <= 1 || a->stride[k] == 0)
            continue;
        m = (delta >= 0 ? delta + a->stride[k] / 2 : delta - a->stride[k] / 2) / a->stride[k];
        if (m > a->n[k] - 1)
            m = a->n[k] - 1;
        if (m < -(a->n[k] - 1))
            m = -(a->n[k] - 1);
        delta -= m * a->stride[k];
    }
    return llabs(delta) < a->head_dim;
}
