/* GPU tests: the GPU reference against the fp64 CPU reference, and the public forward and
 * backward calls against the reference. Without a GPU they report "skipped" (exit status 77).
 *   test_gpu [PART...]   only the cases whose names contain one of the PARTs (each other case
 *                        says "not selected"; a PART that names none is an error) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "flashtune.h"
#include "ft_test.h"
#include "runtime/session.h"

static ft_session session;

typedef struct shape_case {
    const char *shape;
    int causal, bf16;
    ft_layout layout;
} shape_case;

static const shape_case small_cases[] = {
    {"b=1,hq=1,sq=1,sk=1,d=64", 0, 0, FT_LAYOUT_BSHD},
    {"b=2,hq=3,sq=17,sk=17,d=32", 1, 1, FT_LAYOUT_BHSD},
    {"b=1,hq=2,sq=13,sk=40,d=128", 1, 0, FT_LAYOUT_BSHD},
    {"b=1,hq=2,sq=40,sk=13,d=96", 1, 1, FT_LAYOUT_BSHD},
    {"b=2,hq=8,hkv=1,sq=33,sk=29,d=64", 0, 0, FT_LAYOUT_BSHD},
    {"b=1,hq=2,sq=21,sk=21,d=256", 1, 0, FT_LAYOUT_QKV_PACKED},
    {"b=1,hq=2,hkv=1,sq=19,sk=23,d=80", 1, 1, FT_LAYOUT_BSHD},
};

/* Reads a device buffer of n halves into new host memory. */
static uint16_t *read_halves(CUdeviceptr p, size_t n)
{
    uint16_t *h = malloc(n * 2 + 2);
    if (h != NULL && n > 0 && session.cu->p_cuMemcpyDtoH(h, p, n * 2) != CUDA_SUCCESS) {
        free(h);
        return NULL;
    }
    return h;
}

static void test_gpu_reference_matches_cpu(void)
{
    size_t c;

    for (c = 0; c < sizeof small_cases / sizeof small_cases[0]; c++) {
        const shape_case *sc = &small_cases[c];
        ft_problem p;
        ft_tensors t;
        ft_err err;
        uint16_t *buf[3] = {NULL, NULL, NULL};
        double *o64, *m64, *l64;
        float *o32, *m32, *l32;
        size_t rows, i;
        int b;

        memset(&p, 0, sizeof p);
        p.causal = sc->causal, p.bf16 = sc->bf16, p.layout = sc->layout;
        ASSERT_OK(ft__problem_parse(sc->shape, &p, &err), &err);
        ASSERT_OK(ft__tensors_create(session.cu, &p, &t, &err), &err);
        ASSERT_OK(ft__tensors_fill(&session.verifier, &t, 77 + c, 2.f, &err), &err);
        ASSERT_OK(ft__tensors_reference(&session.verifier, &t, &err), &err);
        for (b = 0; b < 3; b++)
            buf[b] = t.plan.elems[b] ? read_halves(t.buf[b], t.plan.elems[b]) : NULL;
        rows = (size_t)p.batch * p.heads_q * p.seqlen_q;
        o64 = malloc(rows * (size_t)p.head_dim * sizeof *o64);
        m64 = malloc(rows * (size_t)p.head_dim * sizeof *m64);
        m32 = malloc(rows * (size_t)p.head_dim * sizeof *m32);
        l64 = malloc(rows * sizeof *l64);
        o32 = malloc(rows * (size_t)p.head_dim * sizeof *o32);
        l32 = malloc(rows * sizeof *l32);
        ASSERT_TRUE(o64 && m64 && l64 && o32 && m32 && l32);
        ASSERT_EQ(session.cu->p_cuMemcpyDtoH(m32, t.mag_ref, rows * (size_t)p.head_dim * 4), CUDA_SUCCESS);
        ASSERT_EQ(session.cu->p_cuMemcpyDtoH(o32, t.o_ref, rows * (size_t)p.head_dim * 4), CUDA_SUCCESS);
        ASSERT_EQ(session.cu->p_cuMemcpyDtoH(l32, t.lse_ref, rows * 4), CUDA_SUCCESS);
        ft__reference_cpu(&p, buf[t.plan.buffer[0]] + t.plan.offset[0], t.plan.strides[0],
                          buf[t.plan.buffer[1]] + t.plan.offset[1], t.plan.strides[1],
                          buf[t.plan.buffer[2]] + t.plan.offset[2], t.plan.strides[2], o64, m64, l64);
        for (i = 0; i < rows * (size_t)p.head_dim; i++)
            if (!(fabs(o32[i] - o64[i]) <= 1e-5 + 1e-5 * fabs(o64[i])) ||
                !(fabs(m32[i] - m64[i]) <= 1e-5 + 1e-5 * fabs(m64[i])))
                FT_FAIL_("%s: O[%zu] GPU %.8g vs CPU %.8g, mag %.8g vs %.8g", sc->shape, i, o32[i], o64[i], m32[i],
                         m64[i]);
        for (i = 0; i < rows; i++) {
            if (isinf(l64[i]) ? !(isinf(l32[i]) && l32[i] > 0) : !(fabs(l32[i] - l64[i]) <= 1e-5 * (1 + fabs(l64[i]))))
                FT_FAIL_("%s: LSE[%zu] GPU %.8g vs CPU %.8g", sc->shape, i, l32[i], l64[i]);
        }
        printf("  reference %s causal=%d %s %s: agrees with fp64\n", sc->shape, sc->causal, sc->bf16 ? "bf16" : "f16",
               ft__layout_name(sc->layout));
        for (b = 0; b < 3; b++)
            free(buf[b]);
        free(o64), free(m64), free(l64), free(o32), free(m32), free(l32);
        ft__tensors_destroy(session.cu, &t);
    }
}

/* The backward's GPU reference (templates/reference.cuh: ft_ref_bwd_dsum, _dq, _dkv) against the
 * fp64 CPU reference (ft__reference_cpu_bwd) on the same 16-bit inputs, O and LSE: dQ, dK and dV
 * within 1e-5 of their terms' magnitude (the CPU's mag, plus for dQ and dK the GPU's cmag, the
 * scale of the fp32 rounding in dP − D), at head dims that are not multiples of 32 (48, 80,
 * 144, 240: lanes that hold fewer elements than others) beside 64; grouped heads, causal with
 * rows that see no key (sq > sk), both layouts. Rows that see no key have dQ exactly 0. */
static void test_gpu_bwd_reference_matches_cpu(void)
{
    static const shape_case cases[] = {
        {"b=2,hq=4,hkv=2,sq=37,sk=29,d=80", 1, 0, FT_LAYOUT_BSHD},
        {"b=1,hq=2,hkv=1,sq=33,sk=41,d=48", 0, 1, FT_LAYOUT_BHSD},
        {"b=1,hq=2,hkv=2,sq=23,sk=19,d=144", 1, 1, FT_LAYOUT_BSHD},
        {"b=1,hq=3,hkv=1,sq=17,sk=17,d=240", 0, 0, FT_LAYOUT_BHSD},
        {"b=1,hq=2,hkv=2,sq=31,sk=31,d=64", 1, 0, FT_LAYOUT_BSHD},
    };
    size_t c;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const shape_case *sc = &cases[c];
        ft_problem p;
        ft_bwd_tensors t;
        ft_err err;
        uint16_t *in[5];
        ft_strides st[5];
        float *lse, *gpu[3], *cmag[2];
        double *cpu[3], *mag[3], worst = 0;
        size_t rows, n[3], i;
        int g;

        memset(&p, 0, sizeof p);
        p.causal = sc->causal, p.bf16 = sc->bf16, p.layout = sc->layout;
        ASSERT_OK(ft__problem_parse(sc->shape, &p, &err), &err);
        ASSERT_OK(ft__bwd_tensors_create(session.cu, &p, &t, &err), &err);
        ASSERT_OK(ft__bwd_tensors_prepare(&session.verifier, &t, 5 + c, 1.f, &err), &err);
        rows = (size_t)p.batch * p.heads_q * p.seqlen_q;
        n[0] = t.nq, n[1] = n[2] = t.nk;
        in[0] = read_halves(t.q, t.nq), in[1] = read_halves(t.k, t.nk), in[2] = read_halves(t.v, t.nk);
        in[3] = read_halves(t.o, t.nq), in[4] = read_halves(t.dout, t.nq);
        st[0] = st[3] = st[4] = t.sq, st[1] = st[2] = t.sk;
        lse = malloc(rows * sizeof *lse);
        ASSERT_TRUE(in[0] && in[1] && in[2] && in[3] && in[4] && lse);
        ASSERT_EQ(session.cu->p_cuMemcpyDtoH(lse, t.lse, rows * 4), CUDA_SUCCESS);
        for (g = 0; g < 3; g++) {
            gpu[g] = malloc(n[g] * sizeof *gpu[g]);
            cpu[g] = malloc(n[g] * sizeof *cpu[g]);
            mag[g] = malloc(n[g] * sizeof *mag[g]);
            ASSERT_TRUE(gpu[g] && cpu[g] && mag[g]);
            ASSERT_EQ(session.cu->p_cuMemcpyDtoH(gpu[g], t.ref[g], n[g] * 4), CUDA_SUCCESS);
            if (g < 2) {
                cmag[g] = malloc(n[g] * sizeof *cmag[g]);
                ASSERT_TRUE(cmag[g] != NULL);
                ASSERT_EQ(session.cu->p_cuMemcpyDtoH(cmag[g], t.cmag[g], n[g] * 4), CUDA_SUCCESS);
            }
        }
        ft__reference_cpu_bwd(&p, (const uint16_t *const *)in, st, lse, cpu, mag);
        for (g = 0; g < 3; g++)
            for (i = 0; i < n[g]; i++) {
                const double diff = fabs(gpu[g][i] - cpu[g][i]);
                const double scale = mag[g][i] + (g < 2 ? cmag[g][i] : 0) + 1e-3;
                if (!(diff <= 1e-5 * scale))
                    FT_FAIL_("%s: %s[%zu] (column %zu) GPU %.8g vs CPU %.8g, terms' magnitude %.3g", sc->shape,
                             g == 0 ? "dQ" : g == 1 ? "dK" : "dV", i, i % (size_t)p.head_dim, gpu[g][i], cpu[g][i],
                             scale);
                worst = fmax(worst, diff / scale);
            }
        /* causal, sq > sk: rows 0 .. sq-sk-1 see no key ([b, sq, hq, d], contiguous) */
        if (p.causal && p.seqlen_q > p.seqlen_k)
            for (i = 0; i < (size_t)p.batch * p.seqlen_q * p.heads_q * p.head_dim; i++)
                if ((int)(i / ((size_t)p.heads_q * p.head_dim) % p.seqlen_q) < p.seqlen_q - p.seqlen_k &&
                    gpu[0][i] != 0.f)
                    FT_FAIL_("%s: dQ[%zu] of a row that sees no key is %.8g, not 0", sc->shape, i, gpu[0][i]);
        printf("  backward reference %s causal=%d %s %s: agrees with fp64 (worst %.2g of 1e-5)\n", sc->shape,
               sc->causal, sc->bf16 ? "bf16" : "f16", ft__layout_name(sc->layout), worst / 1e-5);
        for (g = 0; g < 5; g++)
            free(in[g]);
        for (g = 0; g < 3; g++)
            free(gpu[g]), free(cpu[g]), free(mag[g]);
        free(cmag[0]), free(cmag[1]), free(lse);
        ft__bwd_tensors_destroy(session.cu, &t);
    }
}

/* The arguments of a call of problem p on tensors t, set up for the given version (up to 3: no
 * KV cache): sizes, pointers, strides, causality, and from version 4 the tensors' KV cache or
 * packed keys where they have one (ft__tensors_params gives them); no workspace. */
static void args_of(const ft_tensors *t, const ft_problem *p, int version, ft_attention_args *a)
{
    ft_fwd_params fp;

    ft__tensors_params(t, &fp);
    ft_attention_args_init_version(a, version);
    a->dtype = p->bf16 ? FT_BF16 : FT_F16;
    a->batch = p->batch, a->heads_q = p->heads_q, a->heads_kv = p->heads_kv;
    a->seqlen_q = p->seqlen_q, a->seqlen_k = p->seqlen_k, a->head_dim = p->head_dim;
    a->q = fp.q, a->k = fp.k, a->v = fp.v, a->o = fp.o, a->lse = fp.lse;
    a->q_stride[0] = fp.q_batch_stride, a->q_stride[1] = fp.q_row_stride, a->q_stride[2] = fp.q_head_stride;
    a->k_stride[0] = fp.k_batch_stride, a->k_stride[1] = fp.k_row_stride, a->k_stride[2] = fp.k_head_stride;
    a->v_stride[0] = fp.v_batch_stride, a->v_stride[1] = fp.v_row_stride, a->v_stride[2] = fp.v_head_stride;
    a->o_stride[0] = fp.o_batch_stride, a->o_stride[1] = fp.o_row_stride, a->o_stride[2] = fp.o_head_stride;
    a->causal = p->causal;
    if (version >= 4) {
        a->seqused_k = fp.seqused_k, a->block_table = fp.block_table, a->cu_seqlens_k = fp.cu_seqlens_k;
        a->page_size = fp.page_size, a->block_table_stride = fp.block_table_stride;
    }
}

/* The public API: a context, the default kernel of every head dim, checked like any variant. */
/* Runs ft_attention_forward on tensors t (problem p) through arguments of the given version (with
 * a workspace from version 3 on), O and the LSE poisoned first, and checks them against the
 * reference; which gets ft_attention_kernel's line. */
static void public_forward_check(ft_context *ctx, ft_tensors *t, const ft_problem *p, int version, CUdeviceptr ws,
                                 size_t ws_bytes, ft_check *check, char *which, size_t cap)
{
    ft_attention_args a;
    size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    uint16_t *out;
    float *lse, *oref, *mref, *lref;

    memset(&a, 0xab, sizeof a); /* a version-2 structure's caller has nothing past its fields */
    args_of(t, p, version, &a);
    if (version >= 3) {
        a.workspace = (void *)(uintptr_t)ws;
        a.workspace_bytes = ws_bytes;
    }
    ASSERT_EQ(session.cu->p_cuMemsetD16(t->buf[3], 0xffff, t->plan.elems[3]), CUDA_SUCCESS);
    ASSERT_EQ(session.cu->p_cuMemsetD32(t->lse, 0xffffffffu, rows), CUDA_SUCCESS);
    if (ft_attention_forward(ctx, &a, NULL) != FT_OK)
        FT_FAIL_("forward: %s", ft_last_error(ctx));
    ASSERT_EQ(ft_attention_kernel(ctx, &a, which, cap), FT_OK);
    ASSERT_EQ(session.cu->p_cuCtxSynchronize(), CUDA_SUCCESS);
    out = malloc(t->plan.elems[3] * 2);
    lse = malloc(rows * 4);
    oref = malloc(rows * (size_t)p->head_dim * 4);
    mref = malloc(rows * (size_t)p->head_dim * 4);
    lref = malloc(rows * 4);
    ASSERT_TRUE(out && lse && oref && mref && lref);
    session.cu->p_cuMemcpyDtoH(out, t->buf[3], t->plan.elems[3] * 2);
    session.cu->p_cuMemcpyDtoH(lse, t->lse, rows * 4);
    session.cu->p_cuMemcpyDtoH(oref, t->o_ref, rows * (size_t)p->head_dim * 4);
    session.cu->p_cuMemcpyDtoH(mref, t->mag_ref, rows * (size_t)p->head_dim * 4);
    session.cu->p_cuMemcpyDtoH(lref, t->lse_ref, rows * 4);
    ft__check_outputs(p, out, t->plan.strides[3], lse, oref, mref, lref, check);
    free(out), free(lse), free(oref), free(mref), free(lref);
}

/* One forward call of shape (with causal and bf16) through ctx on fresh random inputs (seed),
 * checked against the reference by public_forward_check; which gets the kernel line, which must
 * name the shape's head dim. Fails the test when the output does not pass. */
static void forward_case(ft_context *ctx, const char *shape, int causal, int bf16, int seed, ft_check *check,
                         char *which, size_t cap)
{
    ft_problem p;
    ft_tensors t;
    ft_err err;
    char want[32];

    memset(&p, 0, sizeof p);
    p.causal = causal, p.bf16 = bf16;
    ASSERT_OK(ft__problem_parse(shape, &p, &err), &err);
    ASSERT_OK(ft__tensors_create(session.cu, &p, &t, &err), &err);
    ASSERT_OK(ft__tensors_fill(&session.verifier, &t, seed, 1.f, &err), &err);
    ASSERT_OK(ft__tensors_reference(&session.verifier, &t, &err), &err);
    public_forward_check(ctx, &t, &p, FT_ARGS_VERSION, 0, 0, check, which, cap);
    snprintf(want, sizeof want, "d=%d,", p.head_dim);
    ASSERT_CONTAINS(which, want); /* the variant that ran, with its head dim */
    if (!check->pass)
        FT_FAIL_("%s causal=%d %s: %s: %s", shape, causal, bf16 ? "bf16" : "f16", which, check->detail);
    ft__tensors_destroy(session.cu, &t);
}

static void test_public_forward(void)
{
    static const int dims[] = {32, 64, 96, 128, 192, 256};
    ft_context_options o;
    ft_context *ctx = NULL;
    size_t i;
    int causal, bf16;

    ft_context_options_init(&o);
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_OK);
    for (i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (causal = 0; causal < 2; causal++)
            for (bf16 = 0; bf16 < 2; bf16++) {
                ft_check check;
                char shape[96], which[256];
                snprintf(shape, sizeof shape, "b=2,hq=4,hkv=2,sq=%d,sk=%d,d=%d", 300 + causal * 77, 300, dims[i]);
                forward_case(ctx, shape, causal, bf16, 5 + (int)i, &check, which, sizeof which);
                printf("  forward %s causal=%d %s: pass (O rel L2 %.2e)\n", shape, causal, bf16 ? "bf16" : "f16",
                       check.o_rel_l2);
            }
    ft_context_destroy(ctx);
}

/* Decode calls (one to a few queries against long keys, grouped-query heads): the short-query
 * kernels run them (their variants have "pack="), with the workspace ft_attention_forward_workspace_size
 * asks for (poisoned with NaN first) and without one (version-2 arguments: the keys unsplit); both
 * pass against the reference. */
static void test_public_decode(void)
{
    static const char *const shapes[] = {"b=2,hq=16,hkv=2,sq=1,sk=5000", "b=3,hq=8,hkv=2,sq=3,sk=2049",
                                         "b=1,hq=4,sq=16,sk=777"};
    static const int dims[] = {64, 128, 256};
    ft_context_options o;
    ft_context *ctx = NULL;
    size_t i, j;
    int causal;

    ft_context_options_init(&o);
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_OK);
    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (j = 0; j < sizeof dims / sizeof dims[0]; j++)
            for (causal = 0; causal < 2; causal++) {
                ft_problem p;
                ft_tensors t;
                ft_check check;
                ft_err err;
                ft_attention_args a;
                ft_fwd_params fp;
                CUdeviceptr ws = 0;
                size_t bytes = 0;
                char shape[96], which[256];
                int version;

                memset(&p, 0, sizeof p);
                p.causal = causal, p.bf16 = (int)(i + j) % 2;
                snprintf(shape, sizeof shape, "%s,d=%d", shapes[i], dims[j]);
                ASSERT_OK(ft__problem_parse(shape, &p, &err), &err);
                ASSERT_OK(ft__tensors_create(session.cu, &p, &t, &err), &err);
                ASSERT_OK(ft__tensors_fill(&session.verifier, &t, 11 + i, 1.f, &err), &err);
                ASSERT_OK(ft__tensors_reference(&session.verifier, &t, &err), &err);
                args_of(&t, &p, FT_ARGS_VERSION, &a);
                ASSERT_EQ(ft_attention_forward_workspace_size(ctx, &a, &bytes), FT_OK);
                if (i == 0)
                    ASSERT_TRUE(bytes > 0); /* 4 blocks of rows on a whole GPU: the keys split */
                if (bytes > 0) {
                    ASSERT_EQ(session.cu->p_cuMemAlloc(&ws, bytes), CUDA_SUCCESS);
                    ASSERT_EQ(session.cu->p_cuMemsetD8(ws, 0xff, bytes), CUDA_SUCCESS);
                }
                for (version = 3; version >= 2; version--) {
                    public_forward_check(ctx, &t, &p, version, ws, bytes, &check, which, sizeof which);
                    ASSERT_CONTAINS(which, "pack=");
                    if (!check.pass)
                        FT_FAIL_("%s causal=%d args version %d: %s", shape, causal, version, check.detail);
                    printf("  decode %s causal=%d %s, %s: pass (O rel L2 %.2e)\n", shape, causal,
                           p.bf16 ? "bf16" : "f16", version == 3 ? "workspace" : "no workspace", check.o_rel_l2);
                }
                if (ws != 0)
                    session.cu->p_cuMemFree(ws);
                ft__tensors_destroy(session.cu, &t);
            }
    ft_context_destroy(ctx);
}

/* The GPU reference with per-sequence key counts (a KV cache's lengths) against the fp64 CPU
 * reference run on each sequence alone. */
static void test_gpu_reference_kv_lengths(void)
{
    ft_problem p, one;
    ft_tensors t;
    ft_err err;
    uint16_t *q, *k, *v;
    float *o32, *l32;
    double *o64, *l64;
    size_t d, i;
    int b, causal;

    for (causal = 0; causal < 2; causal++) {
        memset(&p, 0, sizeof p);
        p.causal = causal, p.bf16 = causal;
        ASSERT_OK(ft__problem_parse("b=5,hq=4,hkv=2,sq=3,sk=70,d=64", &p, &err), &err);
        d = (size_t)p.head_dim;
        ASSERT_OK(ft__tensors_create(session.cu, &p, &t, &err), &err);
        ASSERT_OK(ft__tensors_fill(&session.verifier, &t, 31, 1.f, &err), &err);
        ASSERT_OK(ft__tensors_kv_cache(&session.verifier, &t, 16, 7, &err), &err);
        ASSERT_OK(ft__tensors_reference(&session.verifier, &t, &err), &err);
        ASSERT_EQ(t.kv_lengths[0], 70);
        ASSERT_EQ(t.kv_lengths[1], 17);
        ASSERT_EQ(t.kv_lengths[2], 0);
        q = read_halves(t.buf[0], t.plan.elems[0]);
        k = read_halves(t.buf[1], t.plan.elems[1]);
        v = read_halves(t.buf[2], t.plan.elems[2]);
        o32 = malloc((size_t)p.batch * p.seqlen_q * p.heads_q * d * 4);
        l32 = malloc((size_t)p.batch * p.heads_q * p.seqlen_q * 4);
        o64 = malloc((size_t)p.seqlen_q * p.heads_q * d * sizeof *o64);
        l64 = malloc((size_t)p.heads_q * p.seqlen_q * sizeof *l64);
        ASSERT_TRUE(q && k && v && o32 && l32 && o64 && l64);
        session.cu->p_cuMemcpyDtoH(o32, t.o_ref, (size_t)p.batch * p.seqlen_q * p.heads_q * d * 4);
        session.cu->p_cuMemcpyDtoH(l32, t.lse_ref, (size_t)p.batch * p.heads_q * p.seqlen_q * 4);
        for (b = 0; b < p.batch; b++) {
            int used = 0;
            ft_strides s[3];
            memcpy(s, t.plan.strides, sizeof s);
            ASSERT_EQ(session.cu->p_cuMemcpyDtoH(&used, t.kv_used + (size_t)b * 4, 4), CUDA_SUCCESS);
            one = p;
            one.batch = 1, one.seqlen_k = used > 0 ? used : 1;
            ft__reference_cpu(&one, q + b * s[0].batch, s[0], k + b * s[1].batch, s[1], v + b * s[2].batch, s[2],
                              o64, NULL, l64);
            for (i = 0; i < (size_t)p.seqlen_q * p.heads_q * d; i++) {
                const double want = used > 0 ? o64[i] : 0.0, got = o32[(size_t)b * p.seqlen_q * p.heads_q * d + i];
                if (!(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want)))
                    FT_FAIL_("sequence %d of %d keys: O[%zu] GPU %.8g vs CPU %.8g", b, used, i, got, want);
            }
            for (i = 0; i < (size_t)p.heads_q * p.seqlen_q; i++) {
                const double want = used > 0 ? l64[i] : INFINITY, got = l32[(size_t)b * p.heads_q * p.seqlen_q + i];
                if (isinf(want) ? !(isinf(got) && got > 0) : !(fabs(got - want) <= 1e-5 * (1 + fabs(want))))
                    FT_FAIL_("sequence %d of %d keys: LSE[%zu] GPU %.8g vs CPU %.8g", b, used, i, got, want);
            }
        }
        printf("  reference with lengths 70, 17, 0, 1, 16 causal=%d: agrees with fp64\n", causal);
        free(q), free(k), free(v), free(o32), free(l32), free(o64), free(l64);
        ft__tensors_destroy(session.cu, &t);
    }
}

/* A variant of a spec that a context runs for every call of its operation. */
typedef struct forced_variant {
    const char *spec, *variant;
} forced_variant;

/* ctxs[0] a context of the defaults, ctxs[1 + i] one that runs forced[i]. */
static void forced_contexts(const forced_variant *forced, size_t n, ft_context **ctxs)
{
    size_t f;

    for (f = 0; f <= n; f++) {
        ft_context_options o;
        ft_context_options_init(&o);
        if (f > 0)
            o.spec = forced[f - 1].spec, o.variant = forced[f - 1].variant;
        ctxs[f] = NULL;
        ASSERT_EQ(ft_context_create(&o, &ctxs[f]), FT_OK);
    }
}

/* Calls with a KV cache through the public API (version-4 arguments): pages of 16, 48, 64 and
 * 256 keys in a shuffled pool with a shared page and NaN where no key is, lengths 0, 1, a page, a
 * page plus one and the whole cache, grouped-query ratios 1, 4, 8 and 16, one to 16 queries and a
 * prefill-length one, causal or not, with and without a workspace (split keys or not): the
 * default kernels (split-key ones) pass against the reference; then forced variants of the
 * split-key family's extremes (16- and 64-key tiles, 2 to 8 warps, 2 or 3 stages, one or two row
 * tiles, packed or not) at the head dims up to 128. */
static void test_public_kv_cache(void)
{
    static const struct {
        const char *shape;
        int page;
    } cases[] = {{"b=5,hq=32,hkv=4,sq=1,sk=3000,d=128", 64},  {"b=6,hq=8,hkv=1,sq=1,sk=1000,d=64", 16},
                 {"b=5,hq=16,hkv=1,sq=2,sk=700,d=256", 48},   {"b=5,hq=4,hkv=4,sq=16,sk=2100,d=128", 256},
                 {"b=5,hq=8,hkv=2,sq=100,sk=530,d=96", 48},  {"b=2,hq=2,hkv=2,sq=5,sk=40,d=32", 16}};
    static const forced_variant forced[] = {{"specs/flash_decode.lua", "bn=16,warps=2,stages=2,mt=1,pack=1"},
                                            {"specs/flash_decode.lua", "bn=64,warps=2,stages=2,mt=2,pack=1"},
                                            {"specs/flash_decode.lua", "bn=32,warps=4,stages=3,mt=2,pack=0"},
                                            {"specs/flash_decode.lua", "bn=16,warps=8,stages=2,mt=1,pack=0"}};
    ft_context *ctxs[1 + sizeof forced / sizeof forced[0]];
    size_t c, f;
    int causal;

    forced_contexts(forced, sizeof forced / sizeof forced[0], ctxs);
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (causal = 0; causal < 2; causal++)
            for (f = 0; f < sizeof ctxs / sizeof ctxs[0]; f++) {
                ft_problem p;
                ft_tensors t;
                ft_check check;
                ft_err err;
                ft_fwd_params fp;
                ft_attention_args a;
                CUdeviceptr ws = 0;
                size_t bytes = 0;
                char which[256];
                int with_ws;

                if (f > 0 && (c % 2 != f % 2 || strstr(cases[c].shape, "d=256") != NULL))
                    continue; /* each forced variant on half of the shapes, those its shared memory fits */
                memset(&p, 0, sizeof p);
                p.causal = causal, p.bf16 = (int)(c + f) % 2;
                ASSERT_OK(ft__problem_parse(cases[c].shape, &p, &err), &err);
                ASSERT_OK(ft__tensors_create(session.cu, &p, &t, &err), &err);
                ASSERT_OK(ft__tensors_fill(&session.verifier, &t, 21 + c, 1.f, &err), &err);
                ASSERT_OK(ft__tensors_kv_cache(&session.verifier, &t, cases[c].page, 5 + c + causal, &err), &err);
                ASSERT_OK(ft__tensors_reference(&session.verifier, &t, &err), &err);
                args_of(&t, &p, FT_ARGS_VERSION, &a);
                if (ft_attention_forward_workspace_size(ctxs[f], &a, &bytes) != FT_OK)
                    FT_FAIL_("%s: workspace size: %s", cases[c].shape, ft_last_error(ctxs[f]));
                if (bytes > 0) {
                    ASSERT_EQ(session.cu->p_cuMemAlloc(&ws, bytes), CUDA_SUCCESS);
                    ASSERT_EQ(session.cu->p_cuMemsetD8(ws, 0xff, bytes), CUDA_SUCCESS);
                }
                for (with_ws = bytes > 0; with_ws >= 0; with_ws--) {
                    public_forward_check(ctxs[f], &t, &p, FT_ARGS_VERSION, with_ws ? ws : 0, with_ws ? bytes : 0,
                                         &check, which, sizeof which);
                    ASSERT_CONTAINS(which, "pack=");
                    if (!check.pass)
                        FT_FAIL_("%s causal=%d pages of %d, %s, %s: %s", cases[c].shape, causal, cases[c].page,
                                 f > 0 ? forced[f - 1].variant : "default", with_ws ? "workspace" : "no workspace",
                                 check.detail);
                    printf("  kv cache %s causal=%d pages of %d %s (%s): pass (O rel L2 %.2e)\n", cases[c].shape,
                           causal, cases[c].page, f > 0 ? forced[f - 1].variant : "default",
                           with_ws ? "split" : "unsplit", check.o_rel_l2);
                }
                if (ws != 0)
                    session.cu->p_cuMemFree(ws);
                ft__tensors_destroy(session.cu, &t);
            }
    for (f = 0; f < sizeof ctxs / sizeof ctxs[0]; f++)
        ft_context_destroy(ctxs[f]);
}

/* A variable-length batch through the public API: packed q, k, v ([total, heads, d]) with
 * cu_seqlens_q and cu_seqlens_k, sequences of 0 and 1 queries and of 0, 1, a tile and past it
 * keys, decode, short and prefill-length queries, causal or not (rows that see no key among
 * them), split (a workspace) or not, without and with the tensors' totals (with them prefill-
 * length batches run the sm_90a forward on compute capability 9.0): each sequence's rows against
 * the fp64 CPU reference of that sequence alone, the LSE in its [heads_q, total_q] layout, and
 * the rows past the last sequence's left as they were. There, with the totals, forced variants
 * too: of the sm_90a forward one, two and three consumer warpgroups, ping-pong, two and three
 * stages, causal blocks taken longest first from a block counter (balance=2: its workspace size
 * asked of the API, and run with it and without), O through shared memory and TMA stores with
 * two and three consumer warpgroups (ostore=1: a warpgroup whose rows run past its sequence
 * stores from registers), the overlap across blocks (overlap=2, a block's last P·V with the
 * next block's first S: sequences of 0 and 1 queries between long ones), ping-pong of three
 * warpgroups (FlashAttention-4's d <= 64 point); of the sm80 forward
 * two ring depths, Q in registers or not, overlapped or not. At d = 256 the defaults alone (on
 * compute capability 9.0 O through the only Q buffer, the next block's Q loaded after the store). */
static void test_public_varlen(void)
{
    static const struct {
        int batch, hq, hkv, d;
        int sq[6], sk[6];
    } cases[] = {{6, 16, 2, 128, {1, 1, 1, 1, 1, 1}, {3000, 0, 1, 64, 65, 777}},
                 {5, 8, 8, 64, {4, 0, 16, 1, 9}, {100, 50, 0, 1000, 9}},
                 {3, 4, 1, 96, {100, 37, 0}, {130, 37, 5}},
                 {4, 8, 2, 128, {300, 1, 0, 700}, {300, 1000, 5, 650}},
                 {5, 4, 4, 64, {129, 64, 1, 200, 17}, {129, 200, 0, 64, 3000}},
                 {3, 4, 2, 256, {300, 1, 200}, {300, 700, 129}}};
    static const forced_variant forced[] = {
        {"specs/flash_fwd_sm90.lua", "bm=64,bn=128,stages=2,pingpong=0,overlap=0,balance=0"},
        {"specs/flash_fwd_sm90.lua", "bm=192,bn=64,stages=2,pingpong=0,overlap=1,balance=0"},
        {"specs/flash_fwd_sm90.lua", "bm=128,bn=96,stages=3,pingpong=1,overlap=1,balance=0"},
        {"specs/flash_fwd_sm90.lua", "bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=2"},
        {"specs/flash_fwd_sm90.lua", "bm=128,bn=96,stages=2,pingpong=1,overlap=1,balance=0,ostore=1"},
        {"specs/flash_fwd_sm90.lua", "bm=192,bn=64,stages=2,pingpong=0,overlap=2,balance=0,ostore=1"},
        {"specs/flash_fwd_sm90.lua", "bm=128,bn=80,stages=3,pingpong=0,overlap=2,balance=2"},
        {"specs/flash_fwd_sm90.lua", "bm=192,bn=128,stages=2,pingpong=1,overlap=1,balance=0"},
        {"specs/flash_fwd.lua", "bm=128,bn=64,warps=4,stages=2,qreg=0,overlap=1"},
        {"specs/flash_fwd.lua", "bm=64,bn=64,warps=4,stages=1,qreg=1,overlap=0"}};
    ft_context *ctxs[1 + sizeof forced / sizeof forced[0]];
    CUdeviceptr ws_counter;
    size_t c, f;
    int mode, with_ws;

    forced_contexts(forced, sizeof forced / sizeof forced[0], ctxs);
    ASSERT_EQ(session.cu->p_cuMemAlloc(&ws_counter, 256), CUDA_SUCCESS);
    ASSERT_EQ(session.cu->p_cuMemsetD32(ws_counter, 0x7fffffffu, 64), CUDA_SUCCESS); /* the plan must zero it */
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (mode = 0; mode < 4; mode++) {
            const int causal = mode & 1, totals = mode >> 1;
            const int B = cases[c].batch, hq = cases[c].hq, hkv = cases[c].hkv, d = cases[c].d;
            const int bf16 = (int)(c + causal) % 2, guard = 16;
            int32_t cu_q[7] = {0}, cu_k[7] = {0};
            char how[512];
            int max_q = 0, max_k = 0, b;
            size_t total_q, total_k;
            CUdeviceptr q, k, v, out, lse, dcu_q, dcu_k, ws = 0;
            uint16_t *hqv, *hk, *hv, *ho;
            float *hl;
            ft_attention_args a;
            size_t bytes = 0;
            ft_err err;

            for (b = 0; b < B; b++) {
                cu_q[b + 1] = cu_q[b] + cases[c].sq[b], cu_k[b + 1] = cu_k[b] + cases[c].sk[b];
                max_q = cases[c].sq[b] > max_q ? cases[c].sq[b] : max_q;
                max_k = cases[c].sk[b] > max_k ? cases[c].sk[b] : max_k;
            }
            total_q = (size_t)cu_q[B], total_k = (size_t)cu_k[B];
            ASSERT_EQ(session.cu->p_cuMemAlloc(&q, total_q * hq * d * 2), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemAlloc(&out, (total_q + guard) * hq * d * 2), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemAlloc(&lse, total_q * hq * 4), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemAlloc(&k, total_k * hkv * d * 2), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemAlloc(&v, total_k * hkv * d * 2), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemAlloc(&dcu_q, sizeof cu_q), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemAlloc(&dcu_k, sizeof cu_k), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemcpyHtoD(dcu_q, cu_q, sizeof cu_q), CUDA_SUCCESS);
            ASSERT_EQ(session.cu->p_cuMemcpyHtoD(dcu_k, cu_k, sizeof cu_k), CUDA_SUCCESS);
            ASSERT_OK(ft__verify_fill(&session.verifier, q, total_q * hq * d, 3 + c, 1.f, bf16, &err), &err);
            ASSERT_OK(ft__verify_fill(&session.verifier, k, total_k * hkv * d, 5 + c, 1.f, bf16, &err), &err);
            ASSERT_OK(ft__verify_fill(&session.verifier, v, total_k * hkv * d, 7 + c, 1.f, bf16, &err), &err);
            ft_attention_args_init(&a);
            a.dtype = bf16 ? FT_BF16 : FT_F16;
            a.batch = B, a.heads_q = hq, a.heads_kv = hkv, a.seqlen_q = max_q, a.seqlen_k = max_k, a.head_dim = d;
            a.q = (const void *)(uintptr_t)q, a.k = (const void *)(uintptr_t)k, a.v = (const void *)(uintptr_t)v;
            a.o = (void *)(uintptr_t)out, a.lse = (float *)(uintptr_t)lse;
            a.q_stride[1] = a.o_stride[1] = (int64_t)hq * d, a.q_stride[2] = a.o_stride[2] = d;
            a.k_stride[1] = a.v_stride[1] = (int64_t)hkv * d, a.k_stride[2] = a.v_stride[2] = d;
            a.causal = causal;
            a.cu_seqlens_q = (const int32_t *)(uintptr_t)dcu_q, a.cu_seqlens_k = (const int32_t *)(uintptr_t)dcu_k;
            if (totals)
                a.total_q = (int)total_q, a.total_k = (int)total_k;
            if (ft_attention_kernel(ctxs[0], &a, how, sizeof how) != FT_OK)
                FT_FAIL_("varlen case %zu: kernel: %s", c, ft_last_error(ctxs[0]));
            /* a prefill-length batch with its totals: a prefill kernel (block rows "bm"), where
             * the device has one that reads such batches (the sm_90a forward) */
            if (totals && max_q > 16 && session.arch.cc >= 90 && session.arch.cc < 100 && strstr(how, "bm=") == NULL)
                FT_FAIL_("varlen case %zu with totals: %s", c, how);
            if (ft_attention_forward_workspace_size(ctxs[0], &a, &bytes) != FT_OK)
                FT_FAIL_("varlen case %zu: workspace size: %s", c, ft_last_error(ctxs[0]));
            if (bytes > 0)
                ASSERT_EQ(session.cu->p_cuMemAlloc(&ws, bytes), CUDA_SUCCESS);
            hqv = read_halves(q, total_q * hq * d);
            hk = read_halves(k, total_k * hkv * d);
            hv = read_halves(v, total_k * hkv * d);
            ho = malloc((total_q + guard) * hq * d * 2);
            hl = malloc(total_q * hq * 4 + 4);
            ASSERT_TRUE(hqv && hk && hv && ho && hl);
            for (f = 0; f < sizeof ctxs / sizeof ctxs[0]; f++)
            for (with_ws = (f == 0 && bytes > 0) || (f > 0 && strstr(forced[f - 1].variant, "balance=2")); with_ws >= 0;
                 with_ws--) {
                ft_context *ctx = ctxs[f];
                double worst = 0;
                size_t i;
                const int sm90 = f > 0 && strstr(forced[f - 1].spec, "sm90") != NULL;
                const int counter = f > 0 && strstr(forced[f - 1].variant, "balance=2") != NULL;
                const char *ws_how = counter ? (with_ws ? "block counter" : "no counter") : with_ws ? "split" : "unsplit";
                if (f > 0 && (!totals || max_q <= 16 || d > 128 || (sm90 && session.arch.cc != 90)))
                    break; /* the forced variants: prefill-length batches with totals (sm_90a on an H100/H200) */
                if (counter && !causal)
                    break; /* the longest-first order is for causal blocks */
                if (counter) { /* its workspace: the counter (the API says so), in the first bytes of ws_counter */
                    size_t want = 0;
                    if (ft_attention_forward_workspace_size(ctx, &a, &want) != FT_OK)
                        FT_FAIL_("varlen case %zu: workspace size (block counter): %s", c, ft_last_error(ctx));
                    ASSERT_EQ(want, FT_BLOCK_COUNTER_BYTES);
                    a.workspace = with_ws ? (void *)(uintptr_t)ws_counter : NULL, a.workspace_bytes = with_ws ? 256 : 0;
                } else {
                    a.workspace = with_ws ? (void *)(uintptr_t)ws : NULL, a.workspace_bytes = with_ws ? bytes : 0;
                }
                ASSERT_EQ(session.cu->p_cuMemsetD16(out, 0xffff, (total_q + guard) * hq * d), CUDA_SUCCESS);
                ASSERT_EQ(session.cu->p_cuMemsetD32(lse, 0xffffffffu, total_q * hq), CUDA_SUCCESS);
                if (ft_attention_forward(ctx, &a, NULL) != FT_OK)
                    FT_FAIL_("varlen case %zu %s: forward: %s", c, f > 0 ? forced[f - 1].variant : "default",
                             ft_last_error(ctx));
                ASSERT_EQ(session.cu->p_cuCtxSynchronize(), CUDA_SUCCESS);
                ASSERT_EQ(session.cu->p_cuMemcpyDtoH(ho, out, (total_q + guard) * hq * d * 2), CUDA_SUCCESS);
                ASSERT_EQ(session.cu->p_cuMemcpyDtoH(hl, lse, total_q * hq * 4), CUDA_SUCCESS);
                for (i = total_q * hq * d; i < (total_q + guard) * hq * d; i++)
                    if (ho[i] != 0xffff)
                        FT_FAIL_("varlen case %zu: O written past the last sequence (element %zu)", c, i);
                for (b = 0; b < B; b++) {
                    const int sq = cases[c].sq[b], sk = cases[c].sk[b];
                    const size_t rows = (size_t)sq * hq;
                    ft_problem one;
                    ft_strides qs = {0, (int64_t)hq * d, d}, ks = {0, (int64_t)hkv * d, d};
                    double *o64 = malloc(rows * d * sizeof *o64 + 8), *m64 = malloc(rows * d * sizeof *m64 + 8);
                    double *l64 = malloc(rows * sizeof *l64 + 8);
                    float *o32 = malloc(rows * d * 4 + 4), *m32 = malloc(rows * d * 4 + 4);
                    float *l32 = malloc(rows * 4 + 4), *lk = malloc(rows * 4 + 4);
                    ft_check check;
                    int h, r;
                    ASSERT_TRUE(o64 && m64 && l64 && o32 && m32 && l32 && lk);
                    if (sq == 0) {
                        free(o64), free(m64), free(l64), free(o32), free(m32), free(l32), free(lk);
                        continue;
                    }
                    memset(&one, 0, sizeof one);
                    one.batch = 1, one.heads_q = hq, one.heads_kv = hkv, one.seqlen_q = sq, one.head_dim = d;
                    one.seqlen_k = sk, one.causal = causal, one.bf16 = bf16;
                    if (sk > 0) /* no keys: O = 0 and LSE = +inf below */
                        ft__reference_cpu(&one, hqv + (size_t)cu_q[b] * hq * d, qs, hk + (size_t)cu_k[b] * hkv * d,
                                          ks, hv + (size_t)cu_k[b] * hkv * d, ks, o64, m64, l64);
                    for (i = 0; i < rows * d; i++)
                        o32[i] = sk > 0 ? (float)o64[i] : 0.f, m32[i] = sk > 0 ? (float)m64[i] : 0.f;
                    for (i = 0; i < rows; i++)
                        l32[i] = sk > 0 ? (float)l64[i] : INFINITY;
                    for (h = 0; h < hq; h++)
                        for (r = 0; r < sq; r++)
                            lk[h * sq + r] = hl[(size_t)h * total_q + cu_q[b] + r];
                    ft__check_outputs(&one, ho + (size_t)cu_q[b] * hq * d, qs, lk, o32, m32, l32, &check);
                    if (!check.pass)
                        FT_FAIL_("varlen case %zu sequence %d (%d queries, %d keys) causal=%d %s %s: %s", c, b, sq,
                                 sk, causal, ws_how, f > 0 ? forced[f - 1].variant : how, check.detail);
                    worst = check.o_rel_l2 > worst ? check.o_rel_l2 : worst;
                    free(o64), free(m64), free(l64), free(o32), free(m32), free(l32), free(lk);
                }
                printf("  varlen %d sequences hq=%d hkv=%d d=%d (<= %d queries, <= %d keys) causal=%d %s %s%s: pass "
                       "(worst O rel L2 %.2e; %s)\n", B, hq, hkv, d, max_q, max_k, causal, bf16 ? "bf16" : "f16",
                       ws_how, totals ? ", totals" : "", worst, f > 0 ? forced[f - 1].variant : how);
            }
            free(hqv), free(hk), free(hv), free(ho), free(hl);
            session.cu->p_cuMemFree(q), session.cu->p_cuMemFree(k), session.cu->p_cuMemFree(v);
            session.cu->p_cuMemFree(out), session.cu->p_cuMemFree(lse);
            session.cu->p_cuMemFree(dcu_q), session.cu->p_cuMemFree(dcu_k);
            if (ws != 0)
                session.cu->p_cuMemFree(ws);
        }
    session.cu->p_cuMemFree(ws_counter);
    for (f = 0; f < sizeof ctxs / sizeof ctxs[0]; f++)
        ft_context_destroy(ctxs[f]);
}

/* The backward's arguments of a call of problem p on tensors t. */
static void bwd_args_of(const ft_bwd_tensors *t, const ft_problem *p, ft_attention_bwd_args *a)
{
    ft_bwd_params bp;

    ft__bwd_tensors_params(t, &bp);
    ft_attention_bwd_args_init(a);
    a->dtype = p->bf16 ? FT_BF16 : FT_F16;
    a->batch = p->batch, a->heads_q = p->heads_q, a->heads_kv = p->heads_kv;
    a->seqlen_q = p->seqlen_q, a->seqlen_k = p->seqlen_k, a->head_dim = p->head_dim;
    a->q = bp.q, a->k = bp.k, a->v = bp.v, a->o = bp.o, a->dout = bp.dout, a->lse = bp.lse;
    a->dq = bp.dq, a->dk = bp.dk, a->dv = bp.dv;
    a->q_stride[0] = t->sq.batch, a->q_stride[1] = t->sq.row, a->q_stride[2] = t->sq.head;
    a->k_stride[0] = t->sk.batch, a->k_stride[1] = t->sk.row, a->k_stride[2] = t->sk.head;
    memcpy(a->o_stride, a->q_stride, sizeof a->q_stride);
    memcpy(a->dout_stride, a->q_stride, sizeof a->q_stride);
    memcpy(a->dq_stride, a->q_stride, sizeof a->q_stride);
    memcpy(a->v_stride, a->k_stride, sizeof a->k_stride);
    memcpy(a->dk_stride, a->k_stride, sizeof a->k_stride);
    memcpy(a->dv_stride, a->k_stride, sizeof a->k_stride);
    a->causal = p->causal, a->deterministic = p->deterministic;
}

/* Head dims beyond the six of the first kernels: listed ones (80, 160) and ones no spec lists
 * (48, 112, 224, and the odd multiples of 8 40, 72, 88, 120 and 200: the specs' open d takes
 * them, the defaults of the next head dim above serve them), prefill and decode, each against
 * the reference; on compute capability 9.0 the sm_90a family runs the prefill calls (80 and 112
 * with 32-byte swizzled tiles; 72 and 200 with tiles of 80 and 208 columns in blocks of 16, 88
 * of 96 in blocks of 32, 120 of 128 in blocks of 64, the columns past d zeros). The sm80 family
 * on the same head dims, forced. A head dim no forward template takes (264) is
 * FT_ERR_UNSUPPORTED, saying so, and so is the backward there (test_public_backward has the
 * backward at the new head dims, odd multiples of 8 among them). */
static void test_public_head_dims(void)
{
    static const int dims[] = {48, 80, 112, 160, 224, 40, 72, 88, 120, 200};
    static const forced_variant sm80[] = {{"specs/flash_fwd.lua", "bm=128,bn=64,warps=4,stages=2,qreg=0,overlap=1"}};
    ft_context *ctxs[2], *ctx, *forced;
    size_t i;
    int causal, run;

    forced_contexts(sm80, 1, ctxs);
    ctx = ctxs[0], forced = ctxs[1];
    for (i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (causal = 0; causal < 2; causal++)
            for (run = 0; run < 3; run++) { /* prefill, decode, prefill on the forced sm80 variant */
                const int bf16 = (int)(i + causal) % 2;
                ft_check check;
                char shape[96], which[256];
                if (run == 1)
                    snprintf(shape, sizeof shape, "b=3,hq=8,hkv=2,sq=2,sk=3001,d=%d", dims[i]);
                else
                    snprintf(shape, sizeof shape, "b=2,hq=4,hkv=2,sq=%d,sk=333,d=%d", 257 + causal * 77, dims[i]);
                forward_case(run == 2 ? forced : ctx, shape, causal, bf16, 31 + (int)i, &check, which, sizeof which);
                if (run == 1)
                    ASSERT_CONTAINS(which, "pack=");
                else if (run == 0 && session.arch.cc == 90)
                    ASSERT_CONTAINS(which, "pingpong=");
                else if (run == 2)
                    ASSERT_CONTAINS(which, "qreg=");
                printf("  head dim %s causal=%d %s: pass (O rel L2 %.2e): %s\n", shape, causal, bf16 ? "bf16" : "f16",
                       check.o_rel_l2, which);
            }
    {
        /* no forward template takes 264, nor any backward one */
        ft_problem p;
        ft_tensors t;
        ft_attention_args a;
        ft_attention_bwd_args b;
        ft_err err;
        memset(&p, 0, sizeof p);
        ASSERT_OK(ft__problem_parse("b=1,hq=2,sq=64,sk=64,d=264", &p, &err), &err);
        ASSERT_OK(ft__tensors_create(session.cu, &p, &t, &err), &err);
        args_of(&t, &p, FT_ARGS_VERSION, &a);
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_UNSUPPORTED);
        ASSERT_CONTAINS(ft_last_error(ctx), "no fwd kernel for head dim 264");
        printf("  head dim 264: %s\n", ft_last_error(ctx));
        ft__tensors_destroy(session.cu, &t);
        {
            /* [1, 64, 2, 264] tensors: the inputs share one buffer, each gradient has its own */
            const int64_t stride[3] = {64 * 2 * 264, 2 * 264, 264};
            CUdeviceptr buf[5];
            size_t bytes = 0;
            int k;
            for (k = 0; k < 5; k++)
                ASSERT_EQ(session.cu->p_cuMemAlloc(&buf[k], 64 * 2 * 264 * 2), CUDA_SUCCESS);
            ft_attention_bwd_args_init(&b);
            b.dtype = FT_F16, b.batch = 1, b.heads_q = b.heads_kv = 2, b.seqlen_q = b.seqlen_k = 64, b.head_dim = 264;
            b.q = b.k = b.v = b.o = b.dout = (void *)(uintptr_t)buf[0];
            b.dq = (void *)(uintptr_t)buf[1], b.dk = (void *)(uintptr_t)buf[2], b.dv = (void *)(uintptr_t)buf[3];
            b.lse = (float *)(uintptr_t)buf[4];
            memcpy(b.q_stride, stride, sizeof stride), memcpy(b.k_stride, stride, sizeof stride);
            memcpy(b.v_stride, stride, sizeof stride), memcpy(b.o_stride, stride, sizeof stride);
            memcpy(b.dout_stride, stride, sizeof stride), memcpy(b.dq_stride, stride, sizeof stride);
            memcpy(b.dk_stride, stride, sizeof stride), memcpy(b.dv_stride, stride, sizeof stride);
            ASSERT_EQ(ft_attention_backward_workspace_size(ctx, &b, &bytes), FT_ERR_UNSUPPORTED);
            ASSERT_CONTAINS(ft_last_error(ctx), "no bwd kernel for head dim 264");
            printf("  backward head dim 264: %s\n", ft_last_error(ctx));
            for (k = 0; k < 5; k++)
                session.cu->p_cuMemFree(buf[k]);
        }
    }
    ft_context_destroy(forced);
    ft_context_destroy(ctx);
}

/* ft_attention_backward for every head dim of the first kernels and the multiples of 16 between
 * (48, 80, 112, 144, 160, 176, 224: some listed by the specs, some taken by their open d), both
 * dtypes, causal or not (sq > sk: rows that see no key), grouped-query heads, head-major tensors
 * and a deterministic call: the gradients pass the operation's bounds against the reference
 * (ft__bwd_check_gradients), with the gradients and the caller's workspace poisoned first; a
 * workspace too small or misaligned is refused. On compute capability 9.0 the sm_90a family
 * runs every call its defaults serve (all but d = 176 and 200, and 144 causal:
 * runtime/defaults.c). The odd multiples of 8 too (40, 72, 88, 120, 168, 200; 72 and 200
 * deterministic; 200 on the sm80 family): both
 * families' tiles are the head dim rounded up to 16 (the sm_90a family's with kvsplit to 32),
 * zeros past it (TMA's fill, cp.async's zero-size copies). */
static void test_public_backward(void)
{
    static const int dims[] = {32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256, 40, 72, 88, 120, 168, 200};
    ft_context_options o;
    ft_context *ctx = NULL;
    size_t i;
    int causal, bf16;

    ft_context_options_init(&o);
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_OK);
    for (i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (causal = 0; causal < 2; causal++)
            for (bf16 = 0; bf16 < 2; bf16++) {
                const int det = (dims[i] == 128 || dims[i] == 72 || dims[i] == 200) && causal && bf16;
                /* deterministic above 192: the sm80 family's (no sm_90a structure fits) */
                const int sm90 = session.arch.cc == 90 && dims[i] != 176 && dims[i] != 200 &&
                                 !(dims[i] == 144 && causal);
                ft_problem p;
                ft_bwd_tensors t;
                ft_attention_bwd_args a;
                ft_bwd_check check;
                ft_err err;
                CUdeviceptr ws = 0;
                size_t bytes = 0;
                char shape[96], which[512];

                memset(&p, 0, sizeof p);
                p.causal = causal, p.bf16 = bf16, p.deterministic = det;
                p.layout = i % 2 ? FT_LAYOUT_BHSD : FT_LAYOUT_BSHD;
                snprintf(shape, sizeof shape, "b=2,hq=4,hkv=%d,sq=%d,sk=300,d=%d", i % 3 ? 2 : 4, 300 + causal * 77,
                         dims[i]);
                ASSERT_OK(ft__problem_parse(shape, &p, &err), &err);
                ASSERT_OK(ft__bwd_tensors_create(session.cu, &p, &t, &err), &err);
                ASSERT_OK(ft__bwd_tensors_prepare(&session.verifier, &t, 11 + i, 1.f, &err), &err);
                bwd_args_of(&t, &p, &a);
                if (ft_attention_backward_workspace_size(ctx, &a, &bytes) != FT_OK)
                    FT_FAIL_("%s: %s", shape, ft_last_error(ctx));
                ASSERT_TRUE(bytes > 0 && bytes % 256 == 0);
                ASSERT_EQ(session.cu->p_cuMemAlloc(&ws, bytes + 256), CUDA_SUCCESS);
                ASSERT_EQ(ft_attention_backward(ctx, &a, (void *)(uintptr_t)ws, bytes - 1, NULL), FT_ERR_INVALID_ARGUMENT);
                ASSERT_CONTAINS(ft_last_error(ctx), "workspace");
                ASSERT_EQ(ft_attention_backward(ctx, &a, (void *)(uintptr_t)(ws + 16), bytes, NULL),
                          FT_ERR_INVALID_ARGUMENT);
                ASSERT_EQ(session.cu->p_cuMemsetD16(t.dq, 0xffff, t.nq), CUDA_SUCCESS);
                ASSERT_EQ(session.cu->p_cuMemsetD16(t.dk, 0xffff, t.nk), CUDA_SUCCESS);
                ASSERT_EQ(session.cu->p_cuMemsetD16(t.dv, 0xffff, t.nk), CUDA_SUCCESS);
                ASSERT_EQ(session.cu->p_cuMemsetD8(ws, 0xff, bytes + 256), CUDA_SUCCESS);
                if (ft_attention_backward(ctx, &a, (void *)(uintptr_t)ws, bytes, NULL) != FT_OK)
                    FT_FAIL_("%s: %s", shape, ft_last_error(ctx));
                ASSERT_EQ(session.cu->p_cuCtxSynchronize(), CUDA_SUCCESS);
                ASSERT_OK(ft__bwd_check_gradients(&session.verifier, &t, &check, &err), &err);
                ASSERT_EQ(ft_attention_backward_kernel(ctx, &a, which, sizeof which), FT_OK);
                {
                    char want[32];
                    snprintf(want, sizeof want, "d=%d,", dims[i]);
                    ASSERT_CONTAINS(which, want);
                    /* the deterministic kernel when asked for */
                    if (det)
                        ASSERT_CONTAINS(which, "det=1");
                    else
                        ASSERT_TRUE(strstr(which, "det=1") == NULL);
                    if (sm90)
                        ASSERT_CONTAINS(which, "kvsplit=");
                }
                if (!check.pass)
                    FT_FAIL_("%s causal=%d %s det=%d: %s", shape, causal, bf16 ? "bf16" : "f16", det, check.detail);
                printf("  backward %s causal=%d %s%s %s: pass (rel L2 dQ %.2e dK %.2e dV %.2e): %s\n", shape, causal,
                       bf16 ? "bf16" : "f16", det ? " det" : "", ft__layout_name(p.layout), check.rel_l2[0],
                       check.rel_l2[1], check.rel_l2[2], which);
                session.cu->p_cuMemFree(ws);
                ft__bwd_tensors_destroy(session.cu, &t);
            }
    ft_context_destroy(ctx);
}

/* Bad arguments never crash and name the problem. */
static void test_public_bad_arguments(void)
{
    ft_context_options o;
    ft_context *ctx = NULL;
    ft_attention_args a;

    ft_context_options_init(&o);
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_OK);
    ft_attention_args_init(&a);
    ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(ctx), "sizes must be positive");
    a.batch = a.heads_q = a.seqlen_q = a.seqlen_k = 1, a.heads_kv = 2, a.head_dim = 64;
    ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(ctx), "multiple of heads_kv");
    a.heads_kv = 1;
    ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(ctx), "q is NULL");
    a.q = a.k = a.v = a.o = (void *)(uintptr_t)0x1000008;
    ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(ctx), "16-byte aligned");
    ASSERT_EQ(ft_attention_forward(NULL, &a, NULL), FT_ERR_INVALID_ARGUMENT);
    {
        /* A KV cache's arguments (the tensors are not read before these checks fail). */
        static const int32_t lens[4] = {1, 1, 1, 1};
        a.q = a.k = a.v = a.o = (void *)(uintptr_t)0x1000000;
        a.seqlen_k = 100, a.block_table = lens, a.page_size = 24, a.block_table_stride = 8;
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "page_size (24) must be a positive multiple of 16");
        a.page_size = 16, a.block_table_stride = 6;
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "block_table_stride (6) pages of 16 keys cannot hold seqlen_k (100)");
        a.block_table = NULL;
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "block_table is NULL");
        a.page_size = a.block_table_stride = 0;
        a.seqused_k = (const int32_t *)(uintptr_t)0x1000002;
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "seqused_k is not 4-byte aligned");
        a.seqused_k = NULL, a.block_table = lens, a.page_size = 16, a.block_table_stride = 7, a.cu_seqlens_k = lens;
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "cu_seqlens_k and block_table both say where the keys are");
        a.block_table = NULL, a.page_size = a.block_table_stride = 0;
        a.total_k = 50; /* fewer rows than the longest sequence's keys */
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "cannot be fewer than the longest sequence's rows");
        a.cu_seqlens_k = NULL; /* a total without its cu_seqlens */
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "given only with cu_seqlens_q and cu_seqlens_k");
        a.total_k = 0, a.total_q = -1;
        ASSERT_EQ(ft_attention_forward(ctx, &a, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "non-negative");
        a.total_q = 0, a.seqused_k = NULL, a.seqlen_k = 1;
        a.q = a.k = a.v = a.o = (void *)(uintptr_t)0x1000008;
    }
    {
        char which[8] = "x";
        ASSERT_EQ(ft_attention_kernel(ctx, &a, which, sizeof which), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "16-byte aligned");
        ASSERT_STREQ(which, "");
        ASSERT_EQ(ft_attention_kernel(ctx, &a, NULL, 0), FT_ERR_INVALID_ARGUMENT);
    }
    {
        ft_attention_bwd_args b;
        size_t bytes = 7;
        char *base = (char *)(uintptr_t)0x1000000;
        ft_attention_bwd_args_init(&b);
        ASSERT_EQ(ft_attention_backward_workspace_size(ctx, &b, &bytes), FT_ERR_INVALID_ARGUMENT);
        ASSERT_EQ(bytes, 0);
        ASSERT_CONTAINS(ft_last_error(ctx), "sizes must be positive");
        b.batch = b.heads_q = b.heads_kv = b.seqlen_q = b.seqlen_k = 1, b.head_dim = 64;
        b.q = base, b.k = base + 4096, b.v = base + 8192, b.o = base + 12288, b.dout = base + 16384;
        b.dq = base + 20480, b.dk = base + 24576, b.dv = base + 8192; /* dv on v */
        ASSERT_EQ(ft_attention_backward(ctx, &b, NULL, 0, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "dv overlaps v");
        b.dv = base + 28672;
        ASSERT_EQ(ft_attention_backward(ctx, &b, NULL, 0, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "lse");
        b.version = 2;
        ASSERT_EQ(ft_attention_backward(ctx, &b, NULL, 0, NULL), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(ft_last_error(ctx), "ft_attention_bwd_args_init");
    }
    ft_context_destroy(ctx);
    ft_context_destroy(NULL);
}

int ft_test_failed_;

/* Whether case `name` is among argv's parts (all of them without any). */
static int selected(const char *name, int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++)
        if (strstr(name, argv[i]) != NULL)
            return 1;
    return argc < 2;
}

int main(int argc, char **argv)
{
    static const ft_test_case cases[] = {FT_CASE(test_gpu_reference_matches_cpu), FT_CASE(test_gpu_bwd_reference_matches_cpu), FT_CASE(test_public_forward),
                                         FT_CASE(test_public_decode), FT_CASE(test_public_head_dims), FT_CASE(test_gpu_reference_kv_lengths),
                                         FT_CASE(test_public_kv_cache), FT_CASE(test_public_varlen),
                                         FT_CASE(test_public_backward), FT_CASE(test_public_bad_arguments)};
    const ft_cuda *cu;
    ft_err err;
    int failed = 0, a;
    size_t i;

    for (a = 1; a < argc; a++) { /* a part that selects nothing is a typo, not a pass */
        for (i = 0; i < sizeof cases / sizeof cases[0] && strstr(cases[i].name, argv[a]) == NULL; i++)
            ;
        if (i == sizeof cases / sizeof cases[0]) {
            printf("FAIL: no case's name contains '%s'\n", argv[a]);
            return 2;
        }
    }
    if (ft__cuda_load(&cu, &err) != FT_OK) {
        printf("skipped: %s\n", err.msg);
        return 77;
    }
    if (ft__session_open(0, NULL, 1, &session, &err) != FT_OK) {
        printf("FAIL: opening GPU 0: %s\n", err.msg);
        return 1;
    }
    printf("GPU: %s (%s)\n", session.arch.device_name, session.arch.name);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!selected(cases[i].name, argc, argv)) {
            printf("--   %s (not selected)\n", cases[i].name);
            continue;
        }
        ft_test_failed_ = 0;
        cases[i].fn();
        printf("%s %s\n", ft_test_failed_ ? "FAIL" : "ok  ", cases[i].name);
        failed += ft_test_failed_;
    }
    ft__session_close(&session);
    return failed ? 1 : 0;
}
