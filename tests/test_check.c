/* The comparison and the CPU reference, without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "ft_test.h"
#include "ops/op.h"
#include "runtime/dispatch.h"
#include "runtime/verify.h"

/* Fills n halves with a reproducible pseudo-random normal-ish sequence. */
static void fill(uint16_t *x, size_t n, unsigned seed, int bf16)
{
    size_t i;
    for (i = 0; i < n; i++) {
        double u = 0;
        int k;
        for (k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            u += (seed >> 8 & 0xffff) / 65536.0;
        }
        x[i] = ft__float_to_half((float)((u - 2.0) * 1.7), bf16);
    }
}

static void test_half_conversions(void)
{
    static const float xs[] = {0.f, 1.f, -2.5f, 65504.f, 1e-7f, 3.14159f, -0.0009765625f};
    size_t i;
    for (i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float h = ft__f16_to_float(ft__float_to_f16(xs[i]));
        float b = ft__bf16_to_float(ft__float_to_bf16(xs[i]));
        ASSERT_TRUE(fabsf(h - xs[i]) <= fabsf(xs[i]) * 0x1p-11f + 0x1p-24f);
        ASSERT_TRUE(fabsf(b - xs[i]) <= fabsf(xs[i]) * 0x1p-8f);
    }
    ASSERT_TRUE(isnan(ft__f16_to_float(0xffff)));
    ASSERT_TRUE(isnan(ft__bf16_to_float(0xffff)));
    ASSERT_EQ(ft__float_to_f16(1e6f), 0x7c00); /* overflow to inf */
}

/* Bottom-right causal alignment: with sq = 2, sk = 5, row 0 sees keys 0..3, row 1 all five;
 * with sq = 5, sk = 2, rows 0..2 see nothing (O = 0, LSE = +inf). */
static void test_cpu_reference_causal(void)
{
    ft_problem p;
    uint16_t q[5 * 8], k[5 * 8], v[5 * 8];
    double o[5 * 8], lse[5], s[5], mx, sum, want;
    ft_strides st = {5 * 8, 8, 8};
    int j, c;

    memset(&p, 0, sizeof p);
    p.batch = 1, p.heads_q = 1, p.heads_kv = 1, p.head_dim = 8, p.causal = 1;
    fill(q, 40, 1, 0);
    fill(k, 40, 2, 0);
    fill(v, 40, 3, 0);
    p.seqlen_q = 2, p.seqlen_k = 5;
    ft__reference_cpu(&p, q, st, k, st, v, st, o, NULL, lse);
    /* row 0 by hand over keys 0..3 */
    mx = -INFINITY;
    for (j = 0; j < 4; j++) {
        double acc = 0;
        for (c = 0; c < 8; c++)
            acc += (double)ft__f16_to_float(q[c]) * ft__f16_to_float(k[j * 8 + c]);
        s[j] = acc * ft__problem_scale(&p);
        mx = fmax(mx, s[j]);
    }
    sum = 0;
    for (j = 0; j < 4; j++)
        sum += exp(s[j] - mx);
    ASSERT_TRUE(fabs(lse[0] - (mx + log(sum))) < 1e-12);
    want = 0;
    for (j = 0; j < 4; j++)
        want += exp(s[j] - mx) / sum * ft__f16_to_float(v[j * 8 + 3]);
    ASSERT_TRUE(fabs(o[3] - want) < 1e-12);

    p.seqlen_q = 5, p.seqlen_k = 2;
    ft__reference_cpu(&p, q, st, k, st, v, st, o, NULL, lse);
    for (j = 0; j < 3; j++) {
        ASSERT_TRUE(isinf(lse[j]) && lse[j] > 0);
        for (c = 0; c < 8; c++)
            ASSERT_TRUE(o[j * 8 + c] == 0.0);
    }
    ASSERT_TRUE(isfinite(lse[3]) && isfinite(lse[4]));
}

/* Grouped-query heads: Q head h reads K/V head h / (hq / hkv). */
static void test_cpu_reference_gqa(void)
{
    ft_problem p;
    uint16_t q[4 * 3 * 8], kv1[3 * 1 * 8], vv1[3 * 8];
    uint16_t kv4[3 * 4 * 8], vv4[3 * 4 * 8];
    double o1[3 * 4 * 8], o4[3 * 4 * 8], l1[12], l4[12];
    ft_strides qs = {3 * 4 * 8, 4 * 8, 8}, ks1 = {3 * 8, 8, 8}, ks4 = {3 * 4 * 8, 4 * 8, 8};
    int i, h, c;

    memset(&p, 0, sizeof p);
    p.batch = 1, p.heads_q = 4, p.seqlen_q = 3, p.seqlen_k = 3, p.head_dim = 8;
    fill(q, sizeof q / 2, 7, 1);
    fill(kv1, sizeof kv1 / 2, 8, 1);
    fill(vv1, sizeof vv1 / 2, 9, 1);
    p.bf16 = 1;
    /* the same K/V copied into 4 heads gives the same result as 1 shared head */
    for (i = 0; i < 3; i++)
        for (h = 0; h < 4; h++)
            for (c = 0; c < 8; c++) {
                kv4[(i * 4 + h) * 8 + c] = kv1[i * 8 + c];
                vv4[(i * 4 + h) * 8 + c] = vv1[i * 8 + c];
            }
    p.heads_kv = 1;
    ft__reference_cpu(&p, q, qs, kv1, ks1, vv1, ks1, o1, NULL, l1);
    p.heads_kv = 4;
    ft__reference_cpu(&p, q, qs, kv4, ks4, vv4, ks4, o4, NULL, l4);
    for (i = 0; i < 3 * 4 * 8; i++)
        ASSERT_TRUE(o1[i] == o4[i]);
    for (i = 0; i < 12; i++)
        ASSERT_TRUE(l1[i] == l4[i]);
}

/* A small problem, its reference as float, and a kernel output rounded from it. */
typedef struct fixture {
    ft_problem p;
    uint16_t q[2 * 9 * 2 * 32], k[2 * 9 * 2 * 32], v[2 * 9 * 2 * 32];
    double o64[2 * 9 * 2 * 32], mag64[2 * 9 * 2 * 32], lse64[2 * 2 * 9];
    float o_ref[2 * 9 * 2 * 32], mag_ref[2 * 9 * 2 * 32], lse_ref[2 * 2 * 9];
    uint16_t o[2 * 9 * 2 * 32];
    float lse[2 * 2 * 9];
    ft_strides st;
} fixture;

static void make_fixture(fixture *f, int bf16)
{
    size_t i, n = sizeof f->o / 2;
    memset(f, 0, sizeof *f);
    f->p.batch = 2, f->p.heads_q = 2, f->p.heads_kv = 2, f->p.seqlen_q = 9, f->p.seqlen_k = 9;
    f->p.head_dim = 32, f->p.causal = 1, f->p.bf16 = bf16;
    f->st.batch = 9 * 2 * 32, f->st.row = 2 * 32, f->st.head = 32;
    fill(f->q, n, 11, bf16);
    fill(f->k, n, 12, bf16);
    fill(f->v, n, 13, bf16);
    ft__reference_cpu(&f->p, f->q, f->st, f->k, f->st, f->v, f->st, f->o64, f->mag64, f->lse64);
    for (i = 0; i < n; i++) {
        f->o_ref[i] = (float)f->o64[i];
        f->mag_ref[i] = (float)f->mag64[i];
        f->o[i] = ft__float_to_half(f->o_ref[i], bf16); /* same [b, s, h, d] layout */
    }
    for (i = 0; i < sizeof f->lse / 4; i++)
        f->lse_ref[i] = f->lse[i] = (float)f->lse64[i];
}

static void test_check_passes_rounded_output(void)
{
    static fixture f;
    ft_check c;
    int bf16;
    for (bf16 = 0; bf16 < 2; bf16++) {
        make_fixture(&f, bf16);
        ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
        ASSERT_TRUE(c.pass);
        ASSERT_TRUE(c.o_rel_l2 > 0 && c.o_rel_l2 < (bf16 ? 4e-3 : 5e-4));
    }
}

static void test_check_fails(void)
{
    static fixture f;
    ft_check c;

    /* one unwritten (poisoned) element */
    make_fixture(&f, 0);
    f.o[100] = 0xffff;
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    ASSERT_EQ(c.nonfinite, 1);
    ASSERT_CONTAINS(c.detail, "unwritten or NaN");
    /* an infinite output */
    make_fixture(&f, 0);
    f.o[5] = 0x7c00;
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    /* one element off by 5 % */
    make_fixture(&f, 0);
    f.o[200] = ft__float_to_f16(f.o_ref[200] * 1.05f + 0.05f);
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    ASSERT_EQ(c.bad, 1);
    /* a NaN LSE */
    make_fixture(&f, 0);
    f.lse[3] = NAN;
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    /* an LSE off by 0.01 */
    make_fixture(&f, 0);
    f.lse[4] += 0.01f;
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    /* a row without keys must have LSE = +inf, not a finite number */
    make_fixture(&f, 0);
    f.lse_ref[0] = INFINITY;
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    f.lse[0] = INFINITY;
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(c.pass);
    /* all zeros (a kernel that writes nothing useful) */
    make_fixture(&f, 1);
    memset(f.o, 0, sizeof f.o);
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
}

/* A row whose terms cancel: o is small next to sum p|v|, so the bf16 rounding of P, which every
 * flash kernel does, errs by much more than a bound relative to |o| alone would allow. The
 * bound stated against mag accepts that, and still rejects a real error of the same row. */
static void test_check_cancellation(void)
{
    static fixture f;
    ft_check c;
    size_t i, n;
    int pick = -1;
    double worst = 0;

    make_fixture(&f, 1);
    n = sizeof f.o / 2;
    for (i = 0; i < n; i++) /* the element with the most cancellation */
        if (f.mag_ref[i] > 0 && f.mag_ref[i] / (fabsf(f.o_ref[i]) + 1e-6f) > worst) {
            worst = f.mag_ref[i] / (fabsf(f.o_ref[i]) + 1e-6f);
            pick = (int)i;
        }
    ASSERT_TRUE(pick >= 0 && worst > 20);
    /* an error of 2^-9 * mag: what rounding each p_j to bf16 can do */
    f.o[pick] = ft__float_to_bf16(f.o_ref[pick] + 0x1p-9f * f.mag_ref[pick]);
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(c.pass);
    /* ten times that is a bug */
    f.o[pick] = ft__float_to_bf16(f.o_ref[pick] + 10 * 0x1p-9f * f.mag_ref[pick] + 0.01f);
    ft__check_outputs(&f.p, f.o, f.st, f.lse, f.o_ref, f.mag_ref, f.lse_ref, &c);
    ASSERT_TRUE(!c.pass);
    ASSERT_EQ(c.bad, 1);
}

/* The dispatcher's fallback: the nearest tuned bucket of the same dtype, head dim and causality. */
/* The forward's key of a call (the old bucket's arguments). */
static void fwd_key(const char *dtype, int head_dim, int causal, int batch, int heads_q, int seqlen_q, int seqlen_k,
                    ft_key *out)
{
    ft__key_of(&ft__op_fwd, dtype, head_dim, causal, 0, batch, heads_q, heads_q, seqlen_q, seqlen_k, out);
}

static void test_nearest_bucket(void)
{
    ft_key c[5], want;
    memset(c, 0, sizeof c);
    fwd_key("f16", 128, 0, 4, 16, 4096, 4096, &c[0]);
    fwd_key("f16", 128, 0, 1, 16, 16384, 16384, &c[1]);
    fwd_key("f16", 128, 1, 8, 16, 2048, 2048, &c[2]);  /* causal: never for a non-causal call */
    fwd_key("bf16", 128, 0, 8, 16, 2048, 2048, &c[3]); /* another dtype */
    fwd_key("f16", 64, 0, 8, 32, 2048, 2048, &c[4]);   /* another head dim */
    fwd_key("f16", 128, 0, 2, 16, 3000, 3000, &want);
    ASSERT_EQ(ft__key_get(&want, "seqlen", 0), 4096);
    ASSERT_EQ(ft__key_nearest(&want, c, 5), 0);
    fwd_key("f16", 128, 0, 1, 16, 12000, 12000, &want);
    ASSERT_EQ(ft__key_nearest(&want, c, 5), 1);
    fwd_key("f16", 128, 0, 16, 16, 1024, 1024, &want); /* nearest is 4096, two octaves away */
    ASSERT_EQ(ft__key_nearest(&want, c, 5), 0);
    fwd_key("f16", 96, 0, 1, 16, 1024, 1024, &want);   /* nothing with d=96 */
    ASSERT_EQ(ft__key_nearest(&want, c, 5), -1);
    fwd_key("f16", 128, 0, 4, 16, 8192, 8192, &want);  /* equidistant: the longer one */
    fwd_key("f16", 128, 0, 4, 16, 16384, 16384, &c[1]); /* of want's b*h, as c[0] */
    ASSERT_EQ(ft__key_get(&c[0], "bh", 0), ft__key_get(&want, "bh", 0));
    ASSERT_EQ(ft__key_get(&c[1], "bh", 0), ft__key_get(&want, "bh", 0));
    ASSERT_EQ(ft__key_nearest(&want, c, 5), 1);
    /* A decode call (one query row) has no prefill key near it, however close its length. */
    fwd_key("f16", 128, 0, 4, 16, 1, 4096, &want);
    ASSERT_EQ(ft__key_nearest(&want, c, 5), -1);
    fwd_key("f16", 128, 0, 4, 16, 2, 16384, &c[4]);
    ASSERT_EQ(ft__key_nearest(&want, c, 5), 4);
}

static void test_problem_parse(void)
{
    ft_problem p;
    ft_layout_plan lp;
    ft_err err;

    memset(&p, 0, sizeof p);
    ASSERT_OK(ft__problem_parse("b=4,hq=16,hkv=2,sq=100,sk=300,d=128", &p, &err), &err);
    ASSERT_EQ(p.heads_kv, 2);
    ASSERT_EQ(p.seqlen_k, 300);
    ASSERT_OK(ft__problem_parse("d=64,sq=7,hq=3,b=1", &p, &err), &err);
    ASSERT_EQ(p.heads_kv, 3);
    ASSERT_EQ(p.seqlen_k, 7);
    ASSERT_EQ(ft__problem_parse("b=1,hq=6,hkv=4,sq=1,d=64", &p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "multiple of hkv");
    ASSERT_EQ(ft__problem_parse("b=0,hq=1,sq=1,d=64", &p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(ft__problem_parse("b=1,hq=1,sq=1,d=64,x=3", &p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "unknown dimension 'x'");
    p.layout = FT_LAYOUT_QKV_PACKED;
    ASSERT_OK(ft__problem_parse("b=2,hq=4,sq=10,d=32", &p, &err), &err);
    ft__problem_layout(&p, &lp);
    ASSERT_EQ(lp.elems[0], 2 * 10 * 3 * 4 * 32);
    ASSERT_EQ(lp.offset[1], 4 * 32);
    ASSERT_EQ(lp.strides[2].row, 3 * 4 * 32);
    ASSERT_EQ(ft__problem_parse("b=2,hq=4,sq=10,sk=11,d=32", &p, &err), FT_ERR_INVALID_ARGUMENT);
    p.causal = 1;
    p.layout = FT_LAYOUT_BSHD;
    ASSERT_OK(ft__problem_parse("b=2,hq=4,sq=8,sk=8,d=32", &p, &err), &err);
    ASSERT_TRUE(ft__op_fwd.flops(&p) == 2.0 * 2 * 4 * 8 * 8 * 32);
}

FT_TEST_MAIN(FT_CASE(test_half_conversions), FT_CASE(test_cpu_reference_causal), FT_CASE(test_cpu_reference_gqa),
             FT_CASE(test_check_passes_rounded_output), FT_CASE(test_check_fails),
             FT_CASE(test_check_cancellation), FT_CASE(test_nearest_bucket), FT_CASE(test_problem_parse))
