/* The backward pass without a GPU: its family (entries, launch facts), the source it generates
 * (three kernels, the shared headers), and the fp64 CPU reference (runtime/reference_cpu.c),
 * checked against central differences of the forward, L = Σ dO ∘ O, evaluated in fp64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "ft_test.h"
#include "generator/arch.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "ops/op.h"
#include "runtime/verify.h"
#include "spec_case.h"

static void test_family(void)
{
    const ft_family *fam = ft__family_find("flash_bwd_sm80");
    ft_launch_facts f;
    char name[FT_ENTRY_MAX];

    ASSERT_TRUE(fam != NULL);
    ASSERT_TRUE(fam->op == &ft__op_bwd);
    ASSERT_EQ(ft__family_nentries(fam), 3);
    ASSERT_TRUE(ft__family_entry_name(fam, "ft_x", 0, name, sizeof name));
    ASSERT_STREQ(name, "ft_x");
    ASSERT_TRUE(ft__family_entry_name(fam, "ft_x", 1, name, sizeof name));
    ASSERT_STREQ(name, "ft_x_pre");
    ASSERT_TRUE(ft__family_entry_name(fam, "ft_x", 2, name, sizeof name));
    ASSERT_STREQ(name, "ft_x_post");
    ASSERT_TRUE(!ft__family_entry_name(fam, "ft_x", 3, name, sizeof name));
    ASSERT_TRUE(!ft__family_entry_name(fam, "ft_x", 1, name, 6)); /* "ft_x_pre" does not fit */
    /* The forward families have their main kernel only. */
    ASSERT_EQ(ft__family_nentries(ft__family_find("flash_fwd_sm80")), 1);
    ASSERT_TRUE(ft__family_entry_name(ft__family_find("flash_fwd_sm90"), "ft_y", 0, name, sizeof name));
    ASSERT_STREQ(name, "ft_y");
    ASSERT_TRUE(!ft__family_entry_name(ft__family_find("flash_fwd_sm90"), "ft_y", 1, name, sizeof name));

    ft__family_launch(fam, "d=128,bm=64,bn=128,warps=8,split=1,stages=2,causal=0,dtype=bf16,gqa=atomic,det=1", 256,
                      99000, &f);
    ASSERT_EQ(f.rows_per_block, 64);
    ASSERT_EQ(f.keys_per_block, 128);
    ASSERT_EQ(f.head_dim, 128);
    ASSERT_EQ(f.gqa_atomic, 1);
    ASSERT_EQ(f.deterministic, 1);
    ASSERT_EQ(f.threads, 256);
    ASSERT_EQ(f.smem_dynamic, 99000);
    ASSERT_EQ(f.tma, 0);
    ft__family_launch(fam, "d=64,bm=32,bn=128,warps=4,split=1,stages=1,causal=1,dtype=f16,gqa=loop,det=0", 128, 0, &f);
    ASSERT_EQ(f.gqa_atomic, 0);
    ASSERT_EQ(f.deterministic, 0);
    ASSERT_EQ(f.rows_per_block, 32);
}

/* The built-in spec of the backward generates one source with the three kernels and the shared
 * headers it needs, each once, and nothing left to include. */
static void test_emit(void)
{
    const ft_family *fam = ft__family_find("flash_bwd_sm80");
    ft_spec *spec = NULL;
    ft_variant v;
    ft_arch arch;
    ft_kernel_source ks;
    ft_err err;
    char tail[FT_ENTRY_MAX + 32];

    ASSERT_OK(ft__spec_load(FT_SOURCE_DIR "/specs/flash_bwd.lua", NULL, &spec, &err), &err);
    ASSERT_STREQ(spec->template_name, "flash_bwd_sm80");
    ASSERT_OK(ft__variant_parse(spec, "d=128,bm=64,bn=128,warps=8,split=1,stages=2,causal=1,dtype=f16,gqa=loop,det=0",
                                &v, &err),
              &err);
    ASSERT_OK(ft__arch_builtin("sm_90", &arch, &err), &err);
    ASSERT_OK(ft__emit(spec, fam, &v, &arch, &ks, &err), &err);
    ASSERT_EQ(ks.threads, 256);
    /* The spec's formula: K, V, two stages of Q and dO (pitch d + 8), dSᵀ (pitch bm + 8), LSE and D. */
    ASSERT_EQ(ks.smem_dynamic, 2 * 128 * 136 * 2 + 2 * 2 * 64 * 136 * 2 + 128 * 72 * 2 + 2 * 2 * 64 * 4);
    ASSERT_EQ(ft_test_count(ks.text, "#include \""), 0);
    ASSERT_EQ(ft_test_count(ks.text, "// ---- ft_device.cuh ----"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "// ---- ft_sm80.cuh ----"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "// ---- ft_atomic.cuh ----"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "// ---- ft_params_bwd.cuh ----"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "struct BwdParams {"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "struct FwdParams {"), 0);
    ASSERT_EQ(ft_test_count(ks.text, "#define FTP_GQA_LOOP 1\n"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "#define FTP_DET 0\n"), 1);
    snprintf(tail, sizeof tail, "\nFT_DEFINE_KERNEL(%s)\n", ks.entry);
    ASSERT_TRUE(strlen(ks.text) > strlen(tail) && strcmp(ks.text + strlen(ks.text) - strlen(tail), tail) == 0);
    /* The macro defines the main kernel and the two the plan numbers 1 and 2. */
    ASSERT_EQ(ft_test_count(ks.text, "name##_pre(const ft::BwdParams p)"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "name##_post(const ft::BwdParams p)"), 1);
    ft__kernel_source_free(&ks);
    ft__spec_free(spec);
}

/* The spec's head dims: d is open, so 112 (listed by no spec) joins when asked for and the
 * constraints decide: every multiple of 8 from 32 to 256 (36 and 272 pruned with the first
 * constraint's words). At an odd multiple of 8 the tiles are the head dim rounded up to 16 wide
 * (72: 80, with d = 80's shared memory and warp grids, a source that defines FTP_D 72 and a
 * launch fact tile_dim of 80). At an odd multiple of 16 the dQ grid's tiles are 8·k columns wide, so
 * bm = 64 takes 8 warps (two along the columns) but bm = 32 does not (four would be 20 columns
 * wide at d = 80); at multiples of 32 they stay 16·k wide (d = 96, bm = 32, 8 warps: no grid,
 * as before). split = 2 takes them too (parts of an odd number of n8 tiles: 72 columns at
 * d = 144). A d = 80 variant's source has the spec's shared memory, which the template
 * static_asserts against its layout. */
static void test_head_dims(void)
{
    static const struct {
        const char *variant;
        const char *reason; /* NULL: kept */
    } cases[] = {
        {"d=80,bm=128,bn=128,warps=8,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0", NULL},
        {"d=112,bm=64,bn=64,warps=4,split=1,stages=2,causal=1,dtype=bf16,gqa=atomic,det=1", NULL},
        {"d=160,bm=64,bn=64,warps=8,split=2,stages=2,causal=0,dtype=bf16,gqa=loop,det=0", NULL},
        {"d=36,bm=64,bn=64,warps=4,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0",
         "head dims are multiples of 8 from 32 to 256"},
        {"d=272,bm=64,bn=64,warps=4,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0",
         "head dims are multiples of 8 from 32 to 256"},
        {"d=72,bm=32,bn=128,warps=8,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0",
         "the dQ product needs a warp grid of tiles of 16 × 16 or more (16 × 8 at odd multiples of 16)"},
        {"d=120,bm=64,bn=64,warps=8,split=2,stages=1,causal=1,dtype=bf16,gqa=atomic,det=1", NULL},
        {"d=80,bm=64,bn=128,warps=8,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0", NULL},
        {"d=80,bm=32,bn=128,warps=8,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0",
         "the dQ product needs a warp grid of tiles of 16 × 16 or more (16 × 8 at odd multiples of 16)"},
        {"d=96,bm=32,bn=128,warps=8,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0",
         "the dQ product needs a warp grid of tiles of 16 × 16 or more (16 × 8 at odd multiples of 16)"},
        {"d=144,bm=128,bn=64,warps=8,split=2,stages=1,causal=0,dtype=f16,gqa=loop,det=0", NULL},
    };
    const ft_family *fam = ft__family_find("flash_bwd_sm80");
    ft_spec *spec = NULL;
    ft_variant v;
    ft_arch arch;
    ft_kernel_source ks;
    int di;
    size_t i;
    ft_err err;

    ASSERT_OK(ft__spec_load(FT_SOURCE_DIR "/specs/flash_bwd.lua", NULL, &spec, &err), &err);
    ASSERT_OK(ft__arch_builtin("sm_80", &arch, &err), &err);
    di = ft__spec_param_index(spec, "d");
    ASSERT_TRUE(di >= 0 && spec->params[di].open);
    ASSERT_TRUE(ft__param_has_int(&spec->params[di], 80) && ft__param_has_int(&spec->params[di], 160));
    ASSERT_TRUE(!ft__param_has_int(&spec->params[di], 112));
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_TRUE(ft_test_spec_case(spec, &arch, cases[i].variant, cases[i].reason, &v) >= 0);
    }
    ASSERT_OK(ft__variant_parse(spec, cases[0].variant, &v, &err), &err);
    ASSERT_OK(ft__emit(spec, fam, &v, &arch, &ks, &err), &err);
    ASSERT_EQ(ks.threads, 256);
    /* K, V (pitch 88), two stages of Q and dO, dSᵀ (pitch bm + 8), LSE and D */
    ASSERT_EQ(ks.smem_dynamic, 2 * 128 * 88 * 2 + 2 * 2 * 128 * 88 * 2 + 128 * 136 * 2 + 2 * 2 * 128 * 4);
    ASSERT_EQ(ft_test_count(ks.text, "#define FTP_D 80\n"), 1);
    ft__kernel_source_free(&ks);
    {
        /* d = 72: d = 80's tiles */
        const char *odd = "d=72,bm=128,bn=128,warps=8,split=1,stages=2,causal=0,dtype=f16,gqa=loop,det=0";
        ft_launch_facts facts;
        ASSERT_EQ(ft_test_spec_case(spec, &arch, odd, NULL, &v), 1);
        ASSERT_OK(ft__emit(spec, fam, &v, &arch, &ks, &err), &err);
        ASSERT_EQ(ks.smem_dynamic, 2 * 128 * 88 * 2 + 2 * 2 * 128 * 88 * 2 + 128 * 136 * 2 + 2 * 2 * 128 * 4);
        ASSERT_EQ(ft_test_count(ks.text, "#define FTP_D 72\n"), 1);
        ft__family_launch(fam, odd, ks.threads, ks.smem_dynamic, &facts);
        ASSERT_EQ(facts.head_dim, 72);
        ASSERT_EQ(facts.tile_dim, 80);
        ft__kernel_source_free(&ks);
    }
    ft__spec_free(spec);
}

/* ---- the CPU reference against central differences ---------------------------------------- */

typedef struct case_ {
    int b, hq, hkv, sq, sk, d, causal, bf16;
} case_;

typedef struct data {
    ft_problem p;
    uint16_t *q, *k, *v, *o, *dout;   /* 16-bit, [b, s, h, d] */
    double *qd, *kd, *vd, *dod;       /* their exact values */
    float *lse;                       /* [b, hq, sq] */
    double *lse_exact, *dsum_err;     /* the exact LSE; Σ dO ∘ (16-bit O − O) per row */
    double *grad[3], *mag[3];         /* the reference's dQ, dK, dV */
} data;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

static uint16_t h16(double x, int bf16)
{
    return ft__float_to_half((float)x, bf16);
}

/* O and the LSE of every row in fp64 from the exact inputs, q, k, v given as doubles. */
static double forward_loss(const ft_problem *p, const double *q, const double *k, const double *v,
                           const double *dout, double *o_out, double *lse_out)
{
    const int d = p->head_dim, group = p->heads_q / p->heads_kv;
    const double scale = ft__problem_scale(p);
    double loss = 0, *s = malloc(sizeof(double) * (size_t)p->seqlen_k);
    int b, h, i, j, c;

    for (b = 0; b < p->batch; b++)
        for (h = 0; h < p->heads_q; h++)
            for (i = 0; i < p->seqlen_q; i++) {
                const size_t qo = (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * d;
                int limit = p->seqlen_k;
                double m = -INFINITY, l = 0;
                if (p->causal && i + p->seqlen_k - p->seqlen_q + 1 < limit)
                    limit = i + p->seqlen_k - p->seqlen_q + 1;
                for (j = 0; j < limit; j++) {
                    const size_t ko = (((size_t)b * p->seqlen_k + j) * p->heads_kv + h / group) * d;
                    double x = 0;
                    for (c = 0; c < d; c++)
                        x += q[qo + c] * k[ko + c];
                    s[j] = x * scale;
                    if (s[j] > m)
                        m = s[j];
                }
                for (j = 0; j < limit; j++)
                    l += exp(s[j] - m);
                for (c = 0; c < d; c++) {
                    double acc = 0;
                    for (j = 0; j < limit; j++)
                        acc += exp(s[j] - m) / l * v[(((size_t)b * p->seqlen_k + j) * p->heads_kv + h / group) * d + c];
                    if (o_out != NULL)
                        o_out[qo + c] = limit > 0 ? acc : 0;
                    loss += (limit > 0 ? acc : 0) * dout[qo + c];
                }
                if (lse_out != NULL)
                    lse_out[((size_t)b * p->heads_q + h) * p->seqlen_q + i] = limit > 0 ? m + log(l) : INFINITY;
            }
    free(s);
    return loss;
}

static void data_free(data *x)
{
    int i;
    free(x->q), free(x->k), free(x->v), free(x->o), free(x->dout);
    free(x->qd), free(x->kd), free(x->vd), free(x->dod), free(x->lse), free(x->lse_exact), free(x->dsum_err);
    for (i = 0; i < 3; i++)
        free(x->grad[i]), free(x->mag[i]);
}

/* Random 16-bit inputs (scores of order one), the exact forward's O (rounded to 16 bits, as the
 * kernels are given it) and LSE, and the reference's gradients. */
static void data_make(const case_ *c, data *x)
{
    const size_t nq = (size_t)c->b * c->sq * c->hq * c->d, nk = (size_t)c->b * c->sk * c->hkv * c->d;
    const size_t rows = (size_t)c->b * c->hq * c->sq;
    double *o = malloc(sizeof(double) * nq), *lse = malloc(sizeof(double) * rows);
    const uint16_t *in[5];
    ft_strides st[5];
    size_t n;
    int i;

    memset(x, 0, sizeof *x);
    x->p.batch = c->b, x->p.heads_q = c->hq, x->p.heads_kv = c->hkv, x->p.seqlen_q = c->sq, x->p.seqlen_k = c->sk;
    x->p.head_dim = c->d, x->p.causal = c->causal, x->p.bf16 = c->bf16;
    x->q = malloc(2 * nq), x->o = malloc(2 * nq), x->dout = malloc(2 * nq);
    x->k = malloc(2 * nk), x->v = malloc(2 * nk);
    x->qd = malloc(8 * nq), x->dod = malloc(8 * nq), x->kd = malloc(8 * nk), x->vd = malloc(8 * nk);
    x->lse = malloc(4 * (size_t)c->b * c->hq * c->sq);
    for (i = 0; i < 3; i++) {
        x->grad[i] = malloc(8 * (i == 0 ? nq : nk));
        x->mag[i] = malloc(8 * (i == 0 ? nq : nk));
    }
    for (n = 0; n < nq; n++) {
        x->q[n] = h16(1.5 * uniform(), c->bf16), x->qd[n] = ft__half_to_float(x->q[n], c->bf16);
        x->dout[n] = h16(uniform(), c->bf16), x->dod[n] = ft__half_to_float(x->dout[n], c->bf16);
    }
    for (n = 0; n < nk; n++) {
        x->k[n] = h16(1.5 * uniform(), c->bf16), x->kd[n] = ft__half_to_float(x->k[n], c->bf16);
        x->v[n] = h16(uniform(), c->bf16), x->vd[n] = ft__half_to_float(x->v[n], c->bf16);
    }
    forward_loss(&x->p, x->qd, x->kd, x->vd, x->dod, o, lse);
    x->dsum_err = calloc(rows, sizeof(double));
    for (n = 0; n < nq; n++) {
        const size_t row = n / c->d, bi = row / ((size_t)c->sq * c->hq), si = row / c->hq % c->sq, hi = row % c->hq;
        x->o[n] = h16(o[n], c->bf16);
        x->dsum_err[(bi * c->hq + hi) * c->sq + si] += x->dod[n] * (ft__half_to_float(x->o[n], c->bf16) - o[n]);
    }
    for (n = 0; n < rows; n++)
        x->lse[n] = (float)lse[n];
    x->lse_exact = lse;
    lse = NULL;
    in[0] = x->q, in[1] = x->k, in[2] = x->v, in[3] = x->o, in[4] = x->dout;
    for (i = 0; i < 5; i++) {
        const int kv = i == 1 || i == 2;
        st[i].head = c->d;
        st[i].row = (int64_t)(kv ? c->hkv : c->hq) * c->d;
        st[i].batch = st[i].row * (kv ? c->sk : c->sq);
    }
    ft__reference_cpu_bwd(&x->p, in, st, x->lse, x->grad, x->mag);
    free(o), free(lse);
}

/* What the reference's dQ (which 0) or dK (1) differs from the true gradient by, exactly: its
 * D = rowsum(dO ∘ O) takes the 16-bit O, as the kernels are given it, so its dS is P·(dP − D̃)
 * with D̃ − D = dsum_err per row: −scale·Σ_j P_ij·dsum_err_i·k_j for dQ, −scale·Σ_i for dK. */
static double d_rounding(const data *x, int which, size_t e)
{
    const ft_problem *p = &x->p;
    const int d = p->head_dim, group = p->heads_q / p->heads_kv, c = (int)(e % d);
    const double scale = ft__problem_scale(p);
    const size_t row = e / d;
    double sum = 0;
    int b, h, i, j, t;

    for (b = 0; b < p->batch; b++)
        for (h = 0; h < p->heads_q; h++)
            for (i = 0; i < p->seqlen_q; i++)
                for (j = 0; j < p->seqlen_k; j++) {
                    const size_t qo = (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * d;
                    const size_t ko = (((size_t)b * p->seqlen_k + j) * p->heads_kv + h / group) * d;
                    const size_t r = ((size_t)b * p->heads_q + h) * p->seqlen_q + i;
                    double s = 0;
                    if ((which == 0 && qo / d != row) || (which == 1 && ko / d != row))
                        continue;
                    if (p->causal && j > i + p->seqlen_k - p->seqlen_q)
                        continue;
                    for (t = 0; t < d; t++)
                        s += x->qd[qo + t] * x->kd[ko + t];
                    sum -= scale * exp(s * scale - x->lse_exact[r]) * x->dsum_err[r] *
                           (which == 0 ? x->kd[ko + c] : x->qd[qo + c]);
                }
    return sum;
}

/* Central differences of L = Σ dO ∘ O with respect to every element of one input (0 q, 1 k,
 * 2 v), plus the exact effect of the 16-bit O (d_rounding), against the reference's gradient:
 * the relative L2 error and the worst element's error in units of its term magnitude. What is
 * left is the fp32 LSE's error (about 2^-24·|LSE| relative in P) and the differences' own. */
static void compare(data *x, int which, double *rel_l2, double *worst)
{
    double *t = which == 0 ? x->qd : which == 1 ? x->kd : x->vd;
    const size_t n = which == 0 ? (size_t)x->p.batch * x->p.seqlen_q * x->p.heads_q * x->p.head_dim
                                : (size_t)x->p.batch * x->p.seqlen_k * x->p.heads_kv * x->p.head_dim;
    const double h = 1e-5;
    double num = 0, den = 0;
    size_t e;

    *worst = 0;
    for (e = 0; e < n; e++) {
        const double keep = t[e];
        double up, down, fd, diff;
        t[e] = keep + h;
        up = forward_loss(&x->p, x->qd, x->kd, x->vd, x->dod, NULL, NULL);
        t[e] = keep - h;
        down = forward_loss(&x->p, x->qd, x->kd, x->vd, x->dod, NULL, NULL);
        t[e] = keep;
        fd = (up - down) / (2 * h) + (which < 2 ? d_rounding(x, which, e) : 0);
        diff = fabs(fd - x->grad[which][e]);
        num += diff * diff, den += fd * fd;
        if (diff / (x->mag[which][e] + 1e-3) > *worst)
            *worst = diff / (x->mag[which][e] + 1e-3);
    }
    *rel_l2 = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

static void test_reference_against_differences(void)
{
    /* GQA, causal with fewer and with more queries than keys (rows that see no key), bf16, and
     * a head dim that is not a multiple of 32 (80, GQA and causal, rows that see no key). */
    static const case_ cases[] = {
        {1, 2, 2, 5, 5, 32, 0, 0},
        {2, 4, 2, 6, 9, 32, 1, 0},
        {1, 2, 1, 9, 4, 32, 1, 1},
        {1, 3, 3, 7, 3, 64, 0, 1},
        {1, 4, 2, 6, 5, 80, 1, 0},
    };
    size_t i;
    int w;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        data x;
        data_make(&cases[i], &x);
        for (w = 0; w < 3; w++) {
            double l2, worst;
            compare(&x, w, &l2, &worst);
            if (getenv("FT_TEST_VERBOSE") != NULL)
                fprintf(stderr, "case %zu, gradient %d: relative L2 error %.3g, worst %.3g\n", i, w, l2, worst);
            if (!(l2 < 1e-6) || !(worst < 1e-6)) { /* measured: at most 1.2e-7 */
                fprintf(stderr, "case %zu, gradient %d: relative L2 error %.3g, worst %.3g\n", i, w, l2, worst);
                data_free(&x);
                ASSERT_TRUE(0);
            }
        }
        /* Rows that see no key (causal, sq > sk): exactly zero dQ. */
        if (cases[i].causal && cases[i].sq > cases[i].sk) {
            const int d = cases[i].d, blind = cases[i].sq - cases[i].sk;
            int r, c, hq;
            for (r = 0; r < blind; r++)
                for (hq = 0; hq < cases[i].hq; hq++)
                    for (c = 0; c < d; c++)
                        if (x.grad[0][((size_t)r * cases[i].hq + hq) * d + c] != 0) {
                            data_free(&x);
                            ASSERT_TRUE(!"a row that sees no key has dQ 0");
                        }
        }
        data_free(&x);
    }
}

/* The check itself fails when the gradient is wrong: a reference with dK off by its scale. */
static void test_differences_catch_a_wrong_gradient(void)
{
    static const case_ c = {1, 2, 2, 5, 5, 32, 0, 0};
    data x;
    double l2, worst;
    size_t e;

    data_make(&c, &x);
    for (e = 0; e < (size_t)5 * 2 * 32; e++)
        x.grad[1][e] *= 1.0 / sqrt(32.0);
    compare(&x, 1, &l2, &worst);
    data_free(&x);
    ASSERT_TRUE(l2 > 0.5);
}

FT_TEST_MAIN(FT_CASE(test_family), FT_CASE(test_emit), FT_CASE(test_head_dims),
             FT_CASE(test_reference_against_differences),
             FT_CASE(test_differences_catch_a_wrong_gradient))
