/* Reading the versioned argument structures of the public API (include/flashtune.h). */
#ifndef FT_RUNTIME_ARGS_H
#define FT_RUNTIME_ARGS_H

#include <stddef.h>

#include "common/error.h"
#include "flashtune.h"
#include "ops/problem.h"

/* The call in this version's layout: a structure whose first int is 0 or 1 is flashtune 0.1's
 * version-1 layout (no version field, dtype first) and is copied field by field; one of version
 * 2 to 5 is copied as far as its version has fields (the rest zero). Any other first int is FT_ERR_INVALID_ARGUMENT ("set up by
 * ft_attention_args_init"). in must not be NULL. */
ft_status ft__attention_args_read(const ft_attention_args *in, ft_attention_args *out, ft_err *err);

/* The backward's arguments in this version's layout (version 1 only so far). */
ft_status ft__attention_bwd_args_read(const ft_attention_bwd_args *in, ft_attention_bwd_args *out, ft_err *err);

/* What a forward call asks of its kernel (ops/op.h FT_NEEDS_*): FT_NEEDS_SPLIT with a KV cache
 * (seqused_k, block_table) or a variable-length batch (cu_seqlens_q, cu_seqlens_k) without the
 * totals of its packed tensors, FT_NEEDS_PACKED with them, else FT_NEEDS_DENSE. */
int ft__args_needs(const ft_attention_args *a);

/* The problem of a forward call (sizes, dtype, causality, scale). */
void ft__fwd_args_problem(const ft_attention_args *a, ft_problem *p);

/* The problem of a backward call (sizes, dtype, causality, scale, determinism). */
void ft__bwd_args_problem(const ft_attention_bwd_args *a, ft_problem *p);

/* One [batch, rows, heads, head_dim] tensor of 16-bit elements as the API takes it: its first
 * element's address, its strides in elements (batch, row, head; head_dim contiguous), sizes. */
typedef struct ft_tensor_view {
    uintptr_t addr;
    int64_t stride[3];
    int n[3];     /* batch, rows, heads */
    int head_dim;
} ft_tensor_view;

/* Whether two tensors may share an element. Exact when both have the same strides and those
 * nest (each at least the extent of the smaller ones: the layouts of packed [b, s, 3, h, d] QKV
 * and its gradient, whose tensors interleave without sharing an element); otherwise whether the
 * byte ranges from first to last element meet, which may refuse tensors that only interleave. */
int ft__tensors_may_alias(const ft_tensor_view *a, const ft_tensor_view *b);

/* The size of a version-2 ft_attention_args (flashtune 0.1 after the version field): the fields
 * before version 3's workspace. */
#define FT_ARGS_V2_SIZE offsetof(ft_attention_args, workspace)
#define FT_ARGS_V3_SIZE offsetof(ft_attention_args, seqused_k)
#define FT_ARGS_V4_SIZE offsetof(ft_attention_args, total_q)

/* flashtune 0.1's ft_attention_args, field for field (what programs built against it pass). */
typedef struct ft_attention_args_v1 {
    ft_dtype dtype;
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    const void *q, *k, *v;
    void *o;
    float *lse;
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    int causal;
    float softmax_scale;
} ft_attention_args_v1;

#endif
