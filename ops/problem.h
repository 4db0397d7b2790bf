/* An attention problem: shapes, dtype, masking, and how Q, K, V and O lie in memory. */
#ifndef FT_OPS_PROBLEM_H
#define FT_OPS_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef enum ft_layout {
    FT_LAYOUT_BSHD = 0,      /* Q, K, V, O each [batch, seqlen, heads, d], contiguous */
    FT_LAYOUT_BHSD = 1,      /* each [batch, heads, seqlen, d]: rows strided by d */
    FT_LAYOUT_QKV_PACKED = 2 /* Q, K, V interleaved in one [batch, seqlen, 3, heads, d] buffer */
} ft_layout;

typedef struct ft_problem {
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    int causal;
    int bf16;          /* 0: fp16 */
    float scale;       /* softmax scale; 0 means 1/sqrt(head_dim) */
    ft_layout layout;
    int deterministic; /* the backward: bitwise reproducible gradients (the forward always is) */
    long long workspace_cap; /* the forward: workspace bytes the call gives its launch plan (0: none,
                                so no split keys; -1: whatever the plan asks, to size it) */
    int varlen;        /* the forward: a variable-length batch (cu_seqlens of Q or K given) */
} ft_problem;

/* Strides in elements of one tensor: batch, row (sequence position), head. */
typedef struct ft_strides {
    int64_t batch, row, head;
} ft_strides;

/* Parses "b=4,hq=16,hkv=16,sq=4096,sk=4096,d=128" (hkv defaults to hq, sk to sq; any order;
 * all positive; hq a multiple of hkv). Leaves causal, dtype, scale and layout alone. */
ft_status ft__problem_parse(const char *text, ft_problem *p, ft_err *err);
void ft__problem_format(const ft_problem *p, char *out, size_t cap);

/* Checks sizes, grouped-query heads and that the layout can hold the problem. */
ft_status ft__problem_validate(const ft_problem *p, ft_err *err);

float ft__problem_scale(const ft_problem *p);

/* The element counts of the buffers a layout needs and where each tensor starts in them:
 * q, k, v, o as (buffer index, element offset, strides). Buffers: 0 = Q (or packed QKV),
 * 1 = K, 2 = V, 3 = O; unused buffers have 0 elements. */
typedef struct ft_layout_plan {
    size_t elems[4];
    int buffer[4];        /* which buffer q, k, v, o live in */
    size_t offset[4];     /* element offset of q, k, v, o in it */
    ft_strides strides[4];
} ft_layout_plan;

void ft__problem_layout(const ft_problem *p, ft_layout_plan *out);

const char *ft__layout_name(ft_layout l);
int ft__layout_parse(const char *name, ft_layout *out); /* 1 on success */

#endif
