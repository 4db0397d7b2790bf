#include "runtime/args.h"

#include <string.h>

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
    if (first != FT_ARGS_VERSION)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "the attention arguments have version %d: set them up with ft_attention_args_init "
                        "(this library reads versions 1 and %d)", first, FT_ARGS_VERSION);
    *out = *in;
    return FT_OK;
}

void ft_attention_args_init_version(ft_attention_args *a, int version)
{
    if (a == NULL || version != FT_ARGS_VERSION)
        return;
    memset(a, 0, sizeof *a);
    a->version = version;
}
