/* The versioned argument structure of the public API: what ft_attention_args_init writes, and
 * how a version-2 structure and flashtune 0.1's version-1 one (no version field) are read. */
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "ft_test.h"
#include "ops/op.h"
#include "runtime/args.h"

static void fill_v1(ft_attention_args_v1 *a)
{
    memset(a, 0, sizeof *a);
    a->dtype = FT_BF16;
    a->batch = 3, a->heads_q = 8, a->heads_kv = 2, a->seqlen_q = 1000, a->seqlen_k = 1001, a->head_dim = 128;
    a->q = (const void *)(uintptr_t)0x1000, a->k = (const void *)(uintptr_t)0x2000;
    a->v = (const void *)(uintptr_t)0x3000, a->o = (void *)(uintptr_t)0x4000;
    a->lse = (float *)(uintptr_t)0x5000;
    a->q_stride[0] = 11, a->q_stride[1] = 12, a->q_stride[2] = 13;
    a->k_stride[0] = 21, a->v_stride[1] = 32, a->o_stride[2] = 43;
    a->causal = 1;
    a->softmax_scale = 0.125f;
}

static void test_init(void)
{
    ft_attention_args a;

    memset(&a, 0x5a, sizeof a);
    ft_attention_args_init(&a);
    ASSERT_EQ(a.version, FT_ARGS_VERSION);
    ASSERT_EQ(a.batch, 0);
    ASSERT_TRUE(a.q == NULL && a.lse == NULL);
    ASSERT_TRUE(a.softmax_scale == 0.f);
    /* An unknown version writes nothing. */
    memset(&a, 0x5a, sizeof a);
    ft_attention_args_init_version(&a, 99);
    ASSERT_EQ(a.batch, 0x5a5a5a5a);
    ft_attention_args_init_version(NULL, FT_ARGS_VERSION); /* no crash */
}

static void test_version_1_read(void)
{
    ft_attention_args_v1 old;
    ft_attention_args a;
    ft_err err;

    fill_v1(&old);
    ASSERT_OK(ft__attention_args_read((const ft_attention_args *)(const void *)&old, &a, &err), &err);
    ASSERT_EQ(a.version, FT_ARGS_VERSION);
    ASSERT_EQ(a.dtype, FT_BF16);
    ASSERT_EQ(a.batch, 3);
    ASSERT_EQ(a.heads_q, 8);
    ASSERT_EQ(a.heads_kv, 2);
    ASSERT_EQ(a.seqlen_q, 1000);
    ASSERT_EQ(a.seqlen_k, 1001);
    ASSERT_EQ(a.head_dim, 128);
    ASSERT_TRUE(a.q == old.q && a.k == old.k && a.v == old.v && a.o == old.o && a.lse == old.lse);
    ASSERT_EQ(a.q_stride[0], 11);
    ASSERT_EQ(a.q_stride[2], 13);
    ASSERT_EQ(a.k_stride[0], 21);
    ASSERT_EQ(a.v_stride[1], 32);
    ASSERT_EQ(a.o_stride[2], 43);
    ASSERT_EQ(a.causal, 1);
    ASSERT_TRUE(a.softmax_scale == 0.125f);
    /* f16 is dtype 0: a version-1 structure too. */
    old.dtype = FT_F16;
    ASSERT_OK(ft__attention_args_read((const ft_attention_args *)(const void *)&old, &a, &err), &err);
    ASSERT_EQ(a.dtype, FT_F16);
    ASSERT_EQ(a.batch, 3);
}

static void test_version_2_read(void)
{
    ft_attention_args in, a;
    ft_err err;

    ft_attention_args_init(&in);
    in.dtype = FT_BF16;
    in.batch = 5, in.head_dim = 64, in.causal = 1;
    ASSERT_OK(ft__attention_args_read(&in, &a, &err), &err);
    ASSERT_TRUE(memcmp(&a, &in, sizeof a) == 0);
    in.version = 7;
    ASSERT_EQ(ft__attention_args_read(&in, &a, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "version 7: set them up with ft_attention_args_init");
    in.version = -1;
    ASSERT_EQ(ft__attention_args_read(&in, &a, &err), FT_ERR_INVALID_ARGUMENT);
}

/* Version 3 adds the workspace: a version-2 structure (a program built against the older header)
 * is written and read only as far as its own fields go. */
static void test_version_3_workspace(void)
{
    ft_attention_args in, a;
    unsigned char *bytes = (unsigned char *)&in;
    ft_err err;
    size_t i;

    memset(&in, 0x5a, sizeof in);
    ft_attention_args_init_version(&in, 2);
    ASSERT_EQ(in.version, 2);
    ASSERT_EQ(in.batch, 0);
    for (i = FT_ARGS_V2_SIZE; i < sizeof in; i++)
        ASSERT_EQ(bytes[i], 0x5a); /* past a version-2 structure's end: not its caller's memory */
    in.batch = 7, in.head_dim = 128;
    ASSERT_OK(ft__attention_args_read(&in, &a, &err), &err);
    ASSERT_EQ(a.version, 2);
    ASSERT_EQ(a.batch, 7);
    ASSERT_EQ(a.head_dim, 128);
    ASSERT_TRUE(a.workspace == NULL);
    ASSERT_EQ(a.workspace_bytes, 0);
    ft_attention_args_init_version(&in, 3);
    ASSERT_EQ(in.version, 3);
    ASSERT_TRUE(in.workspace == NULL && in.workspace_bytes == 0);
    in.workspace = (void *)(uintptr_t)0x1000, in.workspace_bytes = 4096;
    ASSERT_OK(ft__attention_args_read(&in, &a, &err), &err);
    ASSERT_TRUE(a.workspace == (void *)(uintptr_t)0x1000);
    ASSERT_EQ(a.workspace_bytes, 4096);
}

/* Version 4 adds the KV cache (seqused_k, block_table, page_size, block_table_stride): a
 * version-3 structure is written and read only as far as its own fields go. */
static void test_version_4_kv_cache(void)
{
    ft_attention_args in, a;
    unsigned char *bytes = (unsigned char *)&in;
    static const int32_t lens[2] = {5, 7};
    ft_err err;
    size_t i;

    memset(&in, 0x5a, sizeof in);
    ft_attention_args_init_version(&in, 3);
    for (i = FT_ARGS_V3_SIZE; i < sizeof in; i++)
        ASSERT_EQ(bytes[i], 0x5a);
    in.workspace_bytes = 64;
    ASSERT_OK(ft__attention_args_read(&in, &a, &err), &err);
    ASSERT_EQ(a.workspace_bytes, 64);
    ASSERT_TRUE(a.seqused_k == NULL && a.block_table == NULL && a.page_size == 0 && a.block_table_stride == 0);
    memset(&in, 0x5a, sizeof in);
    ft_attention_args_init_version(&in, 4);
    ASSERT_EQ(in.version, 4);
    ASSERT_TRUE(in.seqused_k == NULL && in.block_table == NULL && in.page_size == 0);
    for (i = FT_ARGS_V4_SIZE; i < sizeof in; i++)
        ASSERT_EQ(bytes[i], 0x5a);
    in.seqused_k = lens, in.block_table = lens, in.page_size = 64, in.block_table_stride = 3;
    ASSERT_OK(ft__attention_args_read(&in, &a, &err), &err);
    ASSERT_TRUE(a.seqused_k == lens && a.block_table == lens);
    ASSERT_EQ(a.page_size, 64);
    ASSERT_EQ(a.block_table_stride, 3);
    ASSERT_EQ(a.total_q, 0); /* version 5's, not read from a version-4 structure */
    ASSERT_EQ(a.total_k, 0);
}

/* Version 5 adds the rows of packed tensors (total_q, total_k). */
static void test_version_5_totals(void)
{
    ft_attention_args in, a;
    ft_err err;

    ft_attention_args_init(&in);
    ASSERT_EQ(in.version, 5);
    ASSERT_TRUE(in.total_q == 0 && in.total_k == 0);
    in.total_q = 300, in.total_k = 4000;
    ASSERT_OK(ft__attention_args_read(&in, &a, &err), &err);
    ASSERT_EQ(a.total_q, 300);
    ASSERT_EQ(a.total_k, 4000);
    in.version = 6; /* a later header's: refused, not misread */
    ASSERT_EQ(ft__attention_args_read(&in, &a, &err), FT_ERR_INVALID_ARGUMENT);
}

/* What a call asks of its kernel: packed batches with their totals may run any kernel that reads
 * them; without the totals, or with a KV cache, the split-key ones. */
static void test_call_needs(void)
{
    static const int32_t cu[3] = {0, 5, 9};
    ft_attention_args a;

    ft_attention_args_init(&a);
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_DENSE);
    a.cu_seqlens_q = cu, a.cu_seqlens_k = cu;
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_SPLIT);
    a.total_q = 9;
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_SPLIT); /* total_k missing */
    a.total_k = 9;
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_PACKED);
    a.cu_seqlens_k = NULL, a.total_k = 0; /* packed queries, keys in their batch slots */
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_PACKED);
    a.seqused_k = cu;
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_SPLIT);
    a.seqused_k = NULL, a.cu_seqlens_q = NULL, a.total_q = 0, a.block_table = cu;
    ASSERT_EQ(ft__args_needs(&a), FT_NEEDS_SPLIT);
}

/* The FLOPs and the key of a call, for callers that count TFLOP/s or name buckets (the Python
 * binding, the report) without a formula of their own. */
static void test_flops_and_key(void)
{
    ft_attention_args a;
    ft_attention_args_v1 old;
    char key[160];

    ft_attention_args_init(&a);
    a.dtype = FT_BF16, a.batch = 2, a.heads_q = 8, a.heads_kv = 2, a.seqlen_q = 1000, a.seqlen_k = 3000;
    a.head_dim = 128, a.causal = 1;
    ASSERT_TRUE(ft_attention_flops(&a) == 2.0 * 2 * 8 * 1000 * 3000 * 128);
    ASSERT_OK(ft_attention_key(&a, key, sizeof key), &(ft_err){0});
    ASSERT_STREQ(key, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":1,\"group\":4,\"sq\":1024,\"seqlen\":4096,\"bh\":16}");
    /* A decode step of a grouped-query model has a key of its own (the prefill's sq is 8192). */
    a.batch = 32, a.heads_q = 32, a.heads_kv = 4, a.seqlen_q = 1, a.seqlen_k = 8192, a.causal = 0;
    ASSERT_OK(ft_attention_key(&a, key, sizeof key), &(ft_err){0});
    ASSERT_STREQ(key, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":0,\"group\":8,\"sq\":1,\"seqlen\":8192,\"bh\":1024}");
    a.batch = 2, a.heads_q = 8, a.heads_kv = 2, a.seqlen_q = 1000, a.seqlen_k = 3000, a.causal = 1;
    fill_v1(&old); /* a version-1 caller gets the same */
    ASSERT_TRUE(ft_attention_flops((const ft_attention_args *)(const void *)&old) == 2.0 * 3 * 8 * 1000 * 1001 * 128);
    a.batch = 0;
    ASSERT_TRUE(ft_attention_flops(&a) == 0);
    ASSERT_EQ(ft_attention_key(&a, key, sizeof key), FT_ERR_INVALID_ARGUMENT);
    ASSERT_STREQ(key, "");
    ASSERT_TRUE(ft_attention_flops(NULL) == 0);
    ASSERT_EQ(ft_attention_key(NULL, key, sizeof key), FT_ERR_INVALID_ARGUMENT);
}

/* The backward's arguments: init, the version check, its FLOPs (2.5 times the forward's). */
static void test_backward_args(void)
{
    ft_attention_bwd_args b, out;
    ft_attention_args f;
    ft_err err;

    memset(&b, 0x5a, sizeof b);
    ft_attention_bwd_args_init(&b);
    ASSERT_EQ(b.version, FT_BWD_ARGS_VERSION);
    ASSERT_TRUE(b.q == NULL && b.dv == NULL && b.deterministic == 0 && b.dv_stride[2] == 0);
    memset(&out, 0x5a, sizeof out);
    ft_attention_bwd_args_init_version(&out, 7); /* an unknown version writes nothing */
    ASSERT_EQ(out.version, 0x5a5a5a5a);
    b.batch = 2, b.heads_q = 8, b.heads_kv = 2, b.seqlen_q = 100, b.seqlen_k = 300, b.head_dim = 64, b.causal = 1;
    ft_attention_args_init(&f);
    f.batch = 2, f.heads_q = 8, f.heads_kv = 2, f.seqlen_q = 100, f.seqlen_k = 300, f.head_dim = 64, f.causal = 1;
    ASSERT_TRUE(fabs(ft_attention_backward_flops(&b) - 2.5 * ft_attention_flops(&f)) < 1e-3);
    ASSERT_TRUE(ft_attention_backward_flops(&b) > 0);
    ASSERT_OK(ft__attention_bwd_args_read(&b, &out, &err), &err);
    ASSERT_EQ(out.seqlen_k, 300);
    b.version = 2;
    ASSERT_EQ(ft__attention_bwd_args_read(&b, &out, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "ft_attention_bwd_args_init");
    ASSERT_TRUE(ft_attention_backward_flops(&b) == 0);
    ASSERT_TRUE(ft_attention_backward_flops(NULL) == 0);
    b.version = FT_BWD_ARGS_VERSION, b.head_dim = 0;
    ASSERT_TRUE(ft_attention_backward_flops(&b) == 0);
}

/* Which tensors may share an element: the packed QKV layout's three interleave without it. */
static void test_tensors_may_alias(void)
{
    const int b = 2, sq = 5, h = 3, d = 64;
    ft_tensor_view q, k, v, x;
    int i;

    memset(&q, 0, sizeof q);
    q.addr = 0x100000;
    q.stride[0] = (int64_t)sq * 3 * h * d, q.stride[1] = 3 * h * d, q.stride[2] = d;
    q.n[0] = b, q.n[1] = sq, q.n[2] = h, q.head_dim = d;
    k = v = q;
    k.addr = q.addr + 2 * h * d;      /* [b, s, 3, h, d]: K after Q's heads, V after K's */
    v.addr = q.addr + 2 * 2 * h * d;
    ASSERT_TRUE(!ft__tensors_may_alias(&q, &k) && !ft__tensors_may_alias(&k, &q));
    ASSERT_TRUE(!ft__tensors_may_alias(&q, &v) && !ft__tensors_may_alias(&k, &v));
    ASSERT_TRUE(ft__tensors_may_alias(&q, &q));
    for (i = 1; i < 4; i++) { /* shifted by less than a row, or by a whole head: shared elements */
        x = q;
        x.addr = q.addr + 2 * (i == 3 ? d : 8 * i);
        ASSERT_TRUE(ft__tensors_may_alias(&q, &x) && ft__tensors_may_alias(&x, &q));
    }
    x = q; /* past the last element of q: nothing shared */
    x.addr = q.addr + 2 * ((b - 1) * q.stride[0] + (sq - 1) * q.stride[1] + (h - 1) * q.stride[2] + d);
    ASSERT_TRUE(!ft__tensors_may_alias(&q, &x));
    x = k; /* other strides over the same bytes: refused, though they might only interleave */
    x.stride[1] = h * d, x.stride[0] = (int64_t)sq * h * d;
    ASSERT_TRUE(ft__tensors_may_alias(&q, &x));
    x = k; /* expanded (stride 0): not nested, the byte ranges decide */
    x.stride[2] = 0;
    ASSERT_TRUE(ft__tensors_may_alias(&q, &x));
}

FT_TEST_MAIN(FT_CASE(test_init), FT_CASE(test_backward_args), FT_CASE(test_tensors_may_alias), FT_CASE(test_version_1_read), FT_CASE(test_version_2_read),
             FT_CASE(test_version_3_workspace), FT_CASE(test_version_4_kv_cache), FT_CASE(test_version_5_totals), FT_CASE(test_call_needs),
             FT_CASE(test_flops_and_key))
