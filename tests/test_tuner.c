/* Tests of the tuner's checks of what it is given (no GPU, no worker): the shapes it sets up
 * (ft__tune_check_shape), a worker's measurement and race replies (ft__tune_parse_result,
 * ft__tune_parse_race), field by field, and how the leaders' race decides (ft__tuner_race_decide, ft__tuner_neighbour_shape). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "ft_test.h"
#include "tuner/internal.h"
#include "tuner/tune.h"

/* b=4, hq=16, sq=sk=4096, d=128: 5.5e11 FLOP, so 0.055 ms is 10^4 TFLOP/s */
static ft_problem shape(void)
{
    ft_problem p;
    memset(&p, 0, sizeof p);
    p.batch = 4, p.heads_q = 16, p.heads_kv = 16, p.seqlen_q = 4096, p.seqlen_k = 4096, p.head_dim = 128;
    return p;
}

static const char good[] = "result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 "
                           "local=0 verify_ms=1 time_ms=2 detail=";

static void test_a_good_reply(void)
{
    ft_problem p = shape();
    ft_tune_reply r;
    ft_err err;

    ASSERT_OK(ft__tune_parse_result(good, 7, &ft__op_fwd, &p, 10, &r, &err), &err);
    ASSERT_EQ(r.status, FT_RESULT_OK);
    ASSERT_TRUE(r.median_ms == 2.5 && r.q1_ms == 2.4 && r.q3_ms == 2.6);
    ASSERT_EQ(r.reps, 20);
    ASSERT_EQ(r.registers, 128);
    ASSERT_TRUE(fabs(r.tflops - ft__op_fwd.flops(&p) / 2.5e-3 / 1e12) < 1e-9);
    ASSERT_STREQ(r.detail, "");
    /* a failure's reason is the rest of the line, spaces and '=' included */
    ASSERT_OK(ft__tune_parse_result("result id=8 status=launch_failure median=0 q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 "
                                    "local=0 verify_ms=0.5 time_ms=0 detail=cuLaunchKernel: a = b  (made up)",
                                    8, &ft__op_fwd, &p, 10, &r, &err),
              &err);
    ASSERT_EQ(r.status, FT_RESULT_LAUNCH_FAILURE);
    ASSERT_STREQ(r.detail, "cuLaunchKernel: a = b  (made up)");
    ASSERT_TRUE(isnan(r.tflops));
    /* a wrong result may have a NaN error (NaN in the output); the worker's own "error" is a
     * launch failure */
    ASSERT_OK(ft__tune_parse_result("result id=9 status=wrong_result median=0 q1=0 q3=0 reps=0 l2=nan lse=inf "
                                    "regs=0 local=0 verify_ms=1 time_ms=0 detail=NaN in O",
                                    9, &ft__op_fwd, &p, 10, &r, &err),
              &err);
    ASSERT_EQ(r.status, FT_RESULT_WRONG_RESULT);
    ASSERT_TRUE(isnan(r.max_error));
    ASSERT_OK(ft__tune_parse_result("result id=10 status=error median=0 q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 local=0 "
                                    "verify_ms=0 time_ms=0 detail=kernel k is not in the compile cache",
                                    10, &ft__op_fwd, &p, 10, &r, &err),
              &err);
    ASSERT_EQ(r.status, FT_RESULT_LAUNCH_FAILURE);
}

/* Each line breaks one rule; the message must say which. */
static void test_every_bad_reply_is_refused(void)
{
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"result id=7 status=ok median=-1 q1=-1 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "median=-1 is not within"},
        {"result id=7 status=ok median=0 q1=0 q3=0 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "median=0 is not within"},
        {"result id=7 status=ok median=1e-300 q1=1e-300 q3=1e-300 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "median=1e-300 is not within"},
        {"result id=7 status=ok median=nan q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "median=nan is not within"},
        {"result id=7 status=ok median=inf q1=2.4 q3=inf reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "median=inf is not within"},
        {"result id=7 status=ok median=0.05 q1=0.05 q3=0.05 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "TFLOP/s on the shape"},
        {"result id=7 status=ok median=2000 q1=2000 q3=2000 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "median=2000 is not within"},
        {"result id=7 status=ok median=2.5 q1=2.7 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "q1=2.7 is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.45 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "q3=2.45 is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=0 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "reps=0 is out of range"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=2.5 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "reps=2.5 is not an integer"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=99999999999999999999 l2=0.0003 lse=1e-06 regs=128 "
         "local=0 verify_ms=1 time_ms=2 detail=", "is not an integer"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.5 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "l2=0.5 is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=nan lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "l2=nan is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=-1 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "l2=-1 is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=nan regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "lse=nan is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=300 local=0 verify_ms=1 "
         "time_ms=2 detail=", "regs=300 is out of range"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=-1 "
         "time_ms=2 detail=", "verify_ms=-1 is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=nan detail=", "time_ms=nan is not within"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=800 "
         "time_ms=800 detail=", "verify_ms + time_ms=1600 is not within"},
        {"result id=7 status=ok median=2.5ms q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "median=2.5ms is not a number"},
        {"result id=7 status=ok median= q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "the value of median is empty"},
        {"result id=7 status=ok median=2.5 median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "median appears twice"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 tflops=900 detail=", "unknown field tflops"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 verify_ms=1 "
         "time_ms=2 detail=", "local is missing"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2", "detail is missing"},
        {"result id=7 status=great median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "status=great is not a worker's status"},
        {"result id=7 status=timeout median=0 q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 local=0 verify_ms=1 time_ms=2 "
         "detail=", "status=timeout is not a worker's status"},
        {"result id=6 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "id=6 answers no command in flight (expected id=7)"},
        {"result id=+7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "id=+7 answers no command"},
        {"result status=ok id=7 median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=", "no id first"},
        {"result id=7 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 verify_ms=1 "
         "time_ms=2 detail=\033[31m", "a control character (0x1b)"},
        {"result id=7  status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.0003 lse=1e-06 regs=128 local=0 "
         "verify_ms=1 time_ms=2 detail=", "'' is not key=value"},
        {"ok id=7", "'ok' where a result was due"},
        {"", "does not start with a word"},
        {"result id=7 status=wrong_result median=0 q1=0 q3=0 reps=0 l2=-0.5 lse=0 regs=0 local=0 verify_ms=1 "
         "time_ms=0 detail=x", "a negative error"},
        {"result id=7 status=fault median=nan q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 local=0 verify_ms=1 time_ms=0 "
         "detail=x", "median=nan is not within"},
    };
    ft_problem p = shape();
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ft_tune_reply r;
        ft_err err;
        memset(&r, 0x5a, sizeof r);
        if (ft__tune_parse_result(bad[i].line, 7, &ft__op_fwd, &p, 10, &r, &err) != FT_ERR_CORRUPT)
            FT_FAIL_("accepted: %s", bad[i].line);
        ASSERT_CONTAINS(err.msg, bad[i].why);
        ASSERT_EQ(r.reps, 0x5a5a5a5a); /* nothing filled on failure */
    }
}

/* The TFLOP/s bound follows the shape: what is impossible on a small one is fine on a large. */
static void test_tflops_bound_follows_the_shape(void)
{
    ft_problem p = shape();
    ft_tune_reply r;
    ft_err err;
    const char *line = "result id=1 status=ok median=0.1 q1=0.1 q3=0.1 reps=20 l2=0.0003 lse=1e-06 regs=128 "
                       "local=0 verify_ms=1 time_ms=2 detail=";

    ASSERT_OK(ft__tune_parse_result(line, 1, &ft__op_fwd, &p, 10, &r, &err), &err); /* 5500 TFLOP/s */
    p.batch = 8;                                                      /* 11000 */
    ASSERT_EQ(ft__tune_parse_result(line, 1, &ft__op_fwd, &p, 10, &r, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "TFLOP/s on the shape (at most 10000)");
    /* the bf16 tolerance is wider than the f16 one */
    p.batch = 4;
    line = "result id=1 status=ok median=2.5 q1=2.4 q3=2.6 reps=20 l2=0.01 lse=1e-06 regs=128 local=0 "
           "verify_ms=1 time_ms=2 detail=";
    ASSERT_EQ(ft__tune_parse_result(line, 1, &ft__op_fwd, &p, 10, &r, &err), FT_ERR_CORRUPT);
    p.bf16 = 1;
    ASSERT_OK(ft__tune_parse_result(line, 1, &ft__op_fwd, &p, 10, &r, &err), &err);
}

static void test_shapes(void)
{
    static const struct {
        int b, hq, hkv, sq, sk, d;
        const char *why; /* NULL: valid */
    } cases[] = {
        {4, 16, 16, 4096, 4096, 128, NULL},
        {1, 8, 1, 1, 1, 64, NULL},
        {-5, 0, 1, 128, 128, 64, "every size must be positive"},
        {1, 0, 1, 128, 128, 64, "every size must be positive"},
        {1, 8, 3, 128, 128, 64, "hq (8) must be a multiple of hkv (3)"},
        {1, 8, 8, 128, 128, 100, "head dim 100 is not supported"},
        {1, 8, 8, 128, 128, 2048, "head dim 2048 is not supported"},
        {1, 8, 8, (1 << 30) + 1, 128, 64, "sequence lengths"},
        {65536, 65536, 1, 128, 128, 64, "batch 65536 times 65536 heads"},
        {1024, 1024, 1024, 1 << 20, 1 << 20, 1024, "tensors of more than 2^40 elements"},
        {1, 1, 1, 1 << 30, 1, 1024, NULL}, /* 2^40 elements exactly */
        {2, 1, 1, 1 << 30, 1, 1024, "tensors of more than 2^40 elements"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_problem p;
        ft_err err;
        ft_status rc;
        memset(&p, 0, sizeof p);
        p.batch = cases[i].b, p.heads_q = cases[i].hq, p.heads_kv = cases[i].hkv;
        p.seqlen_q = cases[i].sq, p.seqlen_k = cases[i].sk, p.head_dim = cases[i].d;
        rc = ft__tune_check_shape(&p, &err);
        if (cases[i].why == NULL) {
            ASSERT_OK(rc, &err);
        } else {
            ASSERT_EQ(rc, FT_ERR_INVALID_ARGUMENT);
            ASSERT_CONTAINS(err.msg, cases[i].why);
        }
    }
}

/* The worker refuses a shape command the tuner should never have sent. */
static void test_worker_refuses_bad_shapes(void)
{
    static const struct {
        const char *line, *why;
    } cases[] = {
        {"shape id=3 op=fwd b=-5 hq=0 hkv=1 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "b must be a positive integer"},
        {"shape id=3 op=fwd b=1 hq=0 hkv=1 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "hq must be a positive integer"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=3 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "hq (8) must be a multiple of hkv (3)"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=8 sq=128 sk=128 d=100 causal=0 bf16=0 det=0 seed=17\n", "head dim 100 is not supported"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=8 sq=128 sk=128 d=64 causal=2 bf16=0 det=0 seed=17\n", "causal must be 0 or 1"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=8 sq=128 sk=128 d=64 causal=0 bf16=0 det=0\n", "seed must be"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=8 sq=128x sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "sq must be a positive integer"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=8 sq=4294967296 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "sq must be a positive"},
        {"shape id=3 op=fwd b=1 b=2 hq=8 hkv=8 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "b must be"},
        {"shape id=3 b=1 hq=8 hkv=8 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "op must be"},
        {"shape id=3 op=sideways b=1 hq=8 hkv=8 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "op must be"},
        {"shape id=3 op=bwd b=1 hq=8 hkv=8 sq=128 sk=128 d=64 causal=0 bf16=0 det=2 seed=17\n", "det must be 0 or 1"},
        {"shape id=3 op=fwd b=1 hq=8 hkv=8 sq=128 sk=128 d=64 causal=0 bf16=0 det=1 seed=17\n", "which is always deterministic"},
        {"shape id=3 op=fwd b=65536 hq=65536 hkv=1 sq=128 sk=128 d=64 causal=0 bf16=0 det=0 seed=17\n", "invalid shape: batch 65536"},
    };
    const ft_op *op = NULL;
    ft_problem p;
    uint64_t seed;
    ft_err err;
    size_t i;

    ASSERT_OK(ft__worker_parse_shape("shape id=3 op=fwd b=2 hq=8 hkv=4 sq=3000 sk=2500 d=64 causal=1 bf16=1 det=0 seed=17\n",
                                     &op, &p, &seed, &err),
              &err);
    ASSERT_TRUE(p.batch == 2 && p.heads_q == 8 && p.heads_kv == 4 && p.seqlen_q == 3000 && p.seqlen_k == 2500);
    ASSERT_TRUE(p.head_dim == 64 && p.causal == 1 && p.bf16 == 1 && seed == 17 && op == &ft__op_fwd);
    ASSERT_OK(ft__worker_parse_shape("shape id=4 op=bwd b=2 hq=8 hkv=2 sq=300 sk=250 d=128 causal=0 bf16=0 det=1 seed=5\n",
                                     &op, &p, &seed, &err),
              &err);
    ASSERT_TRUE(op == &ft__op_bwd && p.deterministic == 1 && p.heads_kv == 2 && p.head_dim == 128 && seed == 5);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (ft__worker_parse_shape(cases[i].line, &op, &p, &seed, &err) != FT_ERR_INVALID_ARGUMENT)
            FT_FAIL_("accepted: %s", cases[i].line);
        ASSERT_CONTAINS(err.msg, cases[i].why);
    }
}

/* The part of a bucket's problem its kernels are verified on: the whole where the reference is
 * cheap, else fewer sequences and K/V heads, never fewer than one, the rest kept. */
static void test_verify_part(void)
{
    static const struct {
        int b, hq, hkv, sq, sk;
        int split, pb, phq, phkv; /* expected */
    } cases[] = {
        {2, 8, 8, 1024, 1024, 0, 2, 8, 8},        /* 16.8M scores: the whole */
        {4, 16, 16, 1024, 1024, 0, 4, 16, 16},    /* 67M: at the bound, the whole */
        {32, 32, 32, 512, 512, 1, 2, 2, 2},       /* 268M: two sequences, two heads */
        {4, 16, 16, 4096, 4096, 1, 2, 2, 2},      /* 16.8M a head: four heads fit */
        {2, 16, 16, 8192, 8192, 1, 1, 1, 1},      /* 67M a head: one */
        {1, 32, 32, 16384, 16384, 1, 1, 1, 1},    /* 268M a head: one all the same */
        {16, 64, 8, 2048, 2048, 1, 1, 16, 2},     /* grouped: 8 query heads a K/V head, 33.6M a K/V head */
        {32, 64, 8, 1, 8192, 0, 32, 64, 8},       /* decode: 4.2M scores */
        {8, 1, 1, 8192, 8192, 1, 1, 1, 1},        /* one head: one sequence */
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_problem p, part;
        memset(&p, 0, sizeof p);
        p.batch = cases[i].b, p.heads_q = cases[i].hq, p.heads_kv = cases[i].hkv;
        p.seqlen_q = cases[i].sq, p.seqlen_k = cases[i].sk, p.head_dim = 128, p.causal = 1, p.bf16 = 1;
        ASSERT_EQ(ft__worker_verify_part(&p, &part), cases[i].split);
        ASSERT_EQ(part.batch, cases[i].pb);
        ASSERT_EQ(part.heads_q, cases[i].phq);
        ASSERT_EQ(part.heads_kv, cases[i].phkv);
        ASSERT_TRUE(part.seqlen_q == p.seqlen_q && part.seqlen_k == p.seqlen_k && part.head_dim == 128 &&
                    part.causal == 1 && part.bf16 == 1);
    }
}

/* The race's decision: outright beyond the rounds' spread, else by the neighbour. */
static void test_race_decide(void)
{
    double w[MAX_LEADERS][RACE_ROUNDS], nb[MAX_LEADERS][RACE_ROUNDS];
    int tied[MAX_LEADERS], ntied = -1;

#define ROUNDS(m, i, a, b, c) (m[i][0] = (a), m[i][1] = (b), m[i][2] = (c))
    /* 2 % apart with spreads of 1 %: beyond the noise, whatever the neighbour says */
    ROUNDS(w, 0, 1.00, 1.01, 1.00), ROUNDS(w, 1, 1.03, 1.02, 1.02);
    ROUNDS(nb, 0, 0.50, 0.50, 0.50), ROUNDS(nb, 1, 0.10, 0.10, 0.10);
    ASSERT_EQ(ft__tuner_race_decide(2, w, nb, tied, &ntied), 0);
    ASSERT_EQ(ntied, 1);
    /* within the noise (spread 4 %): the fastest median, unless the neighbour says otherwise */
    ROUNDS(w, 0, 1.00, 1.03, 0.99), ROUNDS(w, 1, 1.01, 1.00, 1.02);
    ASSERT_EQ(ft__tuner_race_decide(2, w, NULL, tied, &ntied), 0);
    ASSERT_EQ(ntied, 2);
    ASSERT_EQ(tied[0], 0);
    ASSERT_EQ(tied[1], 1);
    ROUNDS(nb, 0, 0.50, 0.50, 0.50), ROUNDS(nb, 1, 0.40, 0.41, 0.40);
    ASSERT_EQ(ft__tuner_race_decide(2, w, nb, tied, &ntied), 1);
    /* the geometric mean of both shapes: 1 % slower on one, 0.5 % faster on the other loses */
    ROUNDS(nb, 0, 0.500, 0.500, 0.500), ROUNDS(nb, 1, 0.4975, 0.4975, 0.4975);
    ASSERT_EQ(ft__tuner_race_decide(2, w, nb, tied, &ntied), 0);
    /* the fastest without every neighbour round: nothing to weigh it by, it stays */
    ROUNDS(nb, 0, 0.50, NAN, 0.50), ROUNDS(nb, 1, 0.40, 0.40, 0.40);
    ASSERT_EQ(ft__tuner_race_decide(2, w, nb, tied, &ntied), 0);
    /* another tied one without them takes no part; a third leader beyond the noise neither */
    ROUNDS(w, 2, 1.005, 1.005, 1.01), ROUNDS(nb, 2, 0.30, NAN, 0.30);
    ROUNDS(w, 3, 1.20, 1.20, 1.20), ROUNDS(nb, 3, 0.01, 0.01, 0.01);
    ROUNDS(nb, 0, 0.50, 0.50, 0.50);
    ASSERT_EQ(ft__tuner_race_decide(4, w, nb, tied, &ntied), 1);
    ASSERT_EQ(ntied, 3);
    /* a leader with a failed workload round is out of it; none left: -1 */
    ROUNDS(w, 0, NAN, 1.00, 1.00);
    ASSERT_EQ(ft__tuner_race_decide(2, w, NULL, tied, &ntied), 1);
    ROUNDS(w, 1, 1.00, 0, 1.00);
    ASSERT_EQ(ft__tuner_race_decide(2, w, NULL, tied, &ntied), -1);
    ASSERT_EQ(ntied, 0);
#undef ROUNDS
}

/* The neighbour is a shape of the same bucket, or none. */
static void test_neighbour_shape(void)
{
    ft_problem p = shape(), nb;
    ft_key k, kn;

    ft__op_fwd.key(&p, &k);
    ASSERT_TRUE(ft__tuner_neighbour_shape(&p, &k, &nb));
    ASSERT_EQ(nb.seqlen_q, 2816);
    ASSERT_EQ(nb.seqlen_k, 2816);
    ASSERT_EQ(nb.batch, p.batch);
    ft__op_fwd.key(&nb, &kn);
    ASSERT_TRUE(ft__key_equal(&k, &kn));
    /* decode: the queries stay */
    p.seqlen_q = 4, p.seqlen_k = 1000;
    ft__op_fwd.key(&p, &k);
    ASSERT_TRUE(ft__tuner_neighbour_shape(&p, &k, &nb));
    ASSERT_EQ(nb.seqlen_q, 4);
    ASSERT_EQ(nb.seqlen_k, 680);
    /* 11/16 of 600 keys is 408: another bucket (512 keys and fewer), so none */
    p.seqlen_k = 600;
    ft__op_fwd.key(&p, &k);
    ASSERT_TRUE(!ft__tuner_neighbour_shape(&p, &k, &nb));
    /* and the backward's key likewise */
    p = shape();
    ft__op_bwd.key(&p, &k);
    ASSERT_TRUE(ft__tuner_neighbour_shape(&p, &k, &nb));
    ft__op_bwd.key(&nb, &kn);
    ASSERT_TRUE(ft__key_equal(&k, &kn));
}

/* A race's reply: each kernel's medians by round; every malformed or implausible one refused. */
static void test_race_replies(void)
{
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"result id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 detail=", "where a race's result was due"},
        {"raced id=8 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 detail=", "answers no command in flight"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8", "detail is missing"},
        {"raced id=7 status=great time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 detail=", "not a race's status"},
        {"raced id=7 status=wrong_result time_ms=9 detail=x", "not a race's status"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 detail=", "fields where 5 were due"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 ms2=2.7,2.8 detail=", "unknown field ms2"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms01=2.7,2.8 detail=", "unknown field ms01"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 speed=fast detail=", "unknown field speed"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms0=2.7,2.8 detail=", "ms0 appears twice"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5 ms1=2.7,2.8 detail=", "is not 2 numbers"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6,2.7 ms1=2.7,2.8 detail=", "is not 2 numbers"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5;2.6 ms1=2.7,2.8 detail=", "is not 2 numbers"},
        {"raced id=7 status=ok time_ms=9 ms0=nan,2.6 ms1=2.7,2.8 detail=", "ms0[0]=nan is not within"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,-1 ms1=2.7,2.8 detail=", "ms0[1]=-1 is not within"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,0.05 detail=", "TFLOP/s on the shape"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,5000 detail=", "ms1[1]=5000 is not within"},
        {"raced id=7 status=ok time_ms=-1 ms0=2.5,2.6 ms1=2.7,2.8 detail=", "time_ms=-1 is not within"},
        {"raced id=7 status=ok ms0=2.5,2.6 ms1=2.7,2.8 detail=", "4 fields where 5 were due"},
        {"raced id=7 status=fault detail=x", "2 fields where 3 were due"},
        {"raced id=7 status=fault time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 detail=x", "unknown field ms0"},
        {"raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 detail=\033[31m", "control character"},
    };
    ft_problem p = shape();
    ft_race_reply r;
    ft_err err;
    size_t i;

    ASSERT_OK(ft__tune_parse_race("raced id=7 status=ok time_ms=9 ms0=2.5,2.6 ms1=2.7,2.8 detail=", 7, &ft__op_fwd, &p,
                                  2, 2, 10, &r, &err), &err);
    ASSERT_EQ(r.status, FT_RESULT_OK);
    ASSERT_TRUE(r.ms[0] == 2.5 && r.ms[1] == 2.6 && r.ms[2] == 2.7 && r.ms[3] == 2.8);
    ASSERT_OK(ft__tune_parse_race("raced id=7 status=fault time_ms=1 detail=running the kernel: illegal address", 7,
                                  &ft__op_fwd, &p, 2, 2, 10, &r, &err), &err);
    ASSERT_EQ(r.status, FT_RESULT_FAULT);
    ASSERT_CONTAINS(r.detail, "illegal address");
    ASSERT_OK(ft__tune_parse_race("raced id=7 status=error time_ms=0 detail=kernel x is not in the compile cache", 7,
                                  &ft__op_fwd, &p, 2, 2, 10, &r, &err), &err);
    ASSERT_EQ(r.status, FT_RESULT_LAUNCH_FAILURE);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&r, 0x5a, sizeof r);
        if (ft__tune_parse_race(bad[i].line, 7, &ft__op_fwd, &p, 2, 2, 10, &r, &err) != FT_ERR_CORRUPT)
            FT_FAIL_("accepted: %s", bad[i].line);
        ASSERT_CONTAINS(err.msg, bad[i].why);
        ASSERT_TRUE(r.ms[0] != 2.5); /* nothing filled on failure */
    }
}

FT_TEST_MAIN(FT_CASE(test_a_good_reply), FT_CASE(test_race_replies), FT_CASE(test_worker_refuses_bad_shapes), FT_CASE(test_verify_part), FT_CASE(test_every_bad_reply_is_refused),
             FT_CASE(test_tflops_bound_follows_the_shape), FT_CASE(test_shapes),
             FT_CASE(test_race_decide), FT_CASE(test_neighbour_shape))
