/* Tests of the timing (runtime/timing.c) against a made-up CUDA driver, no GPU: the stream runs
 * each piece of work at once on a simulated clock, events read that clock, and a piece's time
 * may depend on the load so far, as a power-limited GPU's clock does. So the medians can be
 * checked exactly: each piece of a race gets its own time in every round whatever the order
 * the turns rotate through, and the heat brings every piece to the sustained clock first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "runtime/timing.h"

struct CUevent_st {
    double t;
};
struct CUstream_st {
    int unused;
};

static double now_ms;  /* the simulated clock */
static double load_ms; /* kernel time run so far */
static struct CUstream_st the_stream;

static CUresult CUDAAPI stream_create(CUstream *s, unsigned int flags)
{
    (void)flags;
    *s = &the_stream;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI stream_sync(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI mem_alloc(CUdeviceptr *p, size_t n)
{
    (void)n;
    *p = 0x1000;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI mem_free(CUdeviceptr p)
{
    (void)p;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI memset_async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n, (void)s;
    now_ms += 0.01; /* the L2 flush */
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI event_create(CUevent *e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult CUDAAPI event_destroy(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI event_record(CUevent e, CUstream s)
{
    (void)s;
    e->t = now_ms;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI event_sync(CUevent e)
{
    (void)e;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI event_elapsed(float *ms, CUevent a, CUevent b)
{
    *ms = (float)(b->t - a->t);
    return CUDA_SUCCESS;
}

static void fake_driver(ft_cuda *cu)
{
    memset(cu, 0, sizeof *cu);
    cu->p_cuStreamCreate = stream_create;
    cu->p_cuStreamSynchronize = stream_sync;
    cu->p_cuStreamDestroy = stream_sync;
    cu->p_cuMemAlloc = mem_alloc;
    cu->p_cuMemFree = mem_free;
    cu->p_cuMemsetD8Async = memset_async;
    cu->p_cuEventCreate = event_create;
    cu->p_cuEventDestroy = event_destroy;
    cu->p_cuEventRecord = event_record;
    cu->p_cuEventSynchronize = event_sync;
    cu->p_cuEventElapsedTime = event_elapsed;
    now_ms = load_ms = 0;
}

/* A piece of work: base_ms at the idle clock, slow times that much once 100 ms of load have
 * run (linearly in between); calls counts its launches. */
typedef struct piece {
    double base_ms, slow;
    int calls;
} piece;

static ft_status run_piece(void *ud, CUstream stream, ft_err *err)
{
    piece *p = ud;
    const double ms = p->base_ms * (1 + (p->slow - 1) * fmin(1.0, load_ms / 100.0));

    (void)stream, (void)err;
    now_ms += ms;
    load_ms += ms;
    p->calls++;
    return FT_OK;
}

static void opts(ft_timing_opts *o, double heat_ms)
{
    ft__timing_opts_default(o);
    o->heat_ms = heat_ms;
    o->budget_ms = 30;
    o->min_reps = 5;
    o->max_reps = 100;
}

/* One piece at a steady clock: its time, and as many repetitions as the budget buys. */
static void test_time_one(void)
{
    ft_cuda cu;
    ft_timing_opts o;
    ft_timing t;
    ft_err err;
    piece p = {2.0, 1.0, 0};

    fake_driver(&cu);
    opts(&o, 0);
    ASSERT_OK(ft__time(&cu, run_piece, &p, &o, &t, &err), &err);
    ASSERT_TRUE(fabs(t.median_ms - 2.0) < 1e-4 && fabs(t.min_ms - 2.0) < 1e-4);
    ASSERT_EQ(t.reps, 15); /* 30 ms of 2 ms repetitions */
}

/* The heat: a piece that slows by 10 % under load is timed at the slow clock after it, and
 * reads fast without it. */
static void test_heat(void)
{
    ft_cuda cu;
    ft_timing_opts o;
    ft_timing t;
    ft_err err;
    piece p = {1.0, 1.1, 0};

    fake_driver(&cu);
    opts(&o, FT_HEAT_MS);
    ASSERT_OK(ft__time(&cu, run_piece, &p, &o, &t, &err), &err);
    ASSERT_TRUE(fabs(t.median_ms - 1.1) < 1e-4);
    ASSERT_TRUE(p.calls * 1.0 >= FT_HEAT_MS); /* the heat ran at least its time */
    fake_driver(&cu);
    p.calls = 0;
    opts(&o, 0);
    ASSERT_OK(ft__time(&cu, run_piece, &p, &o, &t, &err), &err);
    ASSERT_TRUE(t.median_ms < 1.09);
}

/* A race: each piece gets its own time in every round, however the turns rotate; heated, all
 * of them at the slow clock. */
static void test_race(void)
{
    enum { N = 3, ROUNDS = 3 };
    piece p[N] = {{1.0, 1.1, 0}, {2.0, 1.1, 0}, {3.0, 1.1, 0}};
    ft_launch_fn fn[N] = {run_piece, run_piece, run_piece};
    void *ud[N] = {&p[0], &p[1], &p[2]};
    ft_timing ms[N * ROUNDS];
    ft_cuda cu;
    ft_timing_opts o;
    ft_err err;
    int i, r;

    fake_driver(&cu);
    opts(&o, FT_HEAT_MS);
    o.budget_ms = 12;
    ASSERT_OK(ft__time_race(&cu, N, fn, ud, &o, ROUNDS, ms, &err), &err);
    for (i = 0; i < N; i++)
        for (r = 0; r < ROUNDS; r++)
            if (fabs(ms[i * ROUNDS + r].median_ms - p[i].base_ms * 1.1) > 1e-4 || ms[i * ROUNDS + r].reps < 5)
                FT_FAIL_("piece %d round %d: %.6f ms (%d reps), want %.6f", i, r, ms[i * ROUNDS + r].median_ms,
                         ms[i * ROUNDS + r].reps, p[i].base_ms * 1.1);
    /* too many pieces: refused */
    {
        ft_launch_fn many_fn[FT_RACE_MAX + 1];
        void *many_ud[FT_RACE_MAX + 1];
        ft_timing many_ms[FT_RACE_MAX + 1];
        for (i = 0; i <= FT_RACE_MAX; i++)
            many_fn[i] = run_piece, many_ud[i] = &p[0];
        ASSERT_TRUE(ft__time_race(&cu, FT_RACE_MAX + 1, many_fn, many_ud, &o, 1, many_ms, &err) ==
                    FT_ERR_INVALID_ARGUMENT);
    }
}

FT_TEST_MAIN(FT_CASE(test_time_one), FT_CASE(test_heat), FT_CASE(test_race))
