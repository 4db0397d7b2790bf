#include "timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ft__timing_opts_default(ft_timing_opts *o)
{
    o->warmup_ms = 25;
    o->heat_ms = 0;
    o->budget_ms = 200;
    o->min_reps = 10;
    o->max_reps = 200;
    o->flush_bytes = (size_t)256 << 20;
}

int ft__heat_done(double heated_ms, double prev_ms, double cur_ms, double heat_ms)
{
    if (heated_ms >= heat_ms + FT_HEAT_EXTRA_MS)
        return 1;
    return heated_ms >= heat_ms && prev_ms > 0 && fabs(cur_ms - prev_ms) <= FT_HEAT_AGREE * prev_ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *sorted, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)pos;
    double frac = pos - lo;
    return lo + 1 < n ? sorted[lo] * (1 - frac) + sorted[lo + 1] * frac : sorted[lo];
}

void ft__timing_summarise(double *xs, int n, ft_timing *out)
{
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    out->reps = n;
    out->min_ms = xs[0];
    out->median_ms = quantile(xs, n, 0.5);
    out->q1_ms = quantile(xs, n, 0.25);
    out->q3_ms = quantile(xs, n, 0.75);
}

/* Enqueues turns turn0 .. turn0 + nturns - 1 of a race on stream: in each, every piece once (the
 * L2 flushed before each), starting from piece (turn + shift) % n; the events of turn t's piece
 * i are ev[2 * (t * n + i)] and the one after (ev NULL: the batch is timed by the caller's two
 * events at its ends, ends[0] and ends[1]). */
static ft_status enqueue_turns(const ft_cuda *cu, int n, const ft_launch_fn *fn, void *const *ud, CUstream stream,
                               CUdeviceptr flush, size_t flush_bytes, int turn0, int nturns, int shift, CUevent *ev,
                               const CUevent *ends, ft_err *err)
{
    ft_status rc = FT_OK;
    int t, j;

    if (ends != NULL && (rc = ft__cuda_check(cu, cu->p_cuEventRecord(ends[0], stream), err, "cuEventRecord")) != FT_OK)
        return rc;
    for (t = turn0; t < turn0 + nturns; t++)
        for (j = 0; j < n; j++) {
            const int i = (t + shift + j) % n;
            CUevent *e = ev != NULL ? &ev[2 * ((size_t)t * n + i)] : NULL;
            if (flush != 0 &&
                (rc = ft__cuda_check(cu, cu->p_cuMemsetD8Async(flush, (unsigned char)(t + j), flush_bytes, stream),
                                     err, "flushing L2")) != FT_OK)
                return rc;
            if ((e != NULL && (rc = ft__cuda_check(cu, cu->p_cuEventRecord(e[0], stream), err, "cuEventRecord")) !=
                                  FT_OK) ||
                (rc = fn[i](ud[i], stream, err)) != FT_OK ||
                (e != NULL && (rc = ft__cuda_check(cu, cu->p_cuEventRecord(e[1], stream), err, "cuEventRecord")) !=
                                  FT_OK))
                return rc;
        }
    if (ends != NULL)
        rc = ft__cuda_check(cu, cu->p_cuEventRecord(ends[1], stream), err, "cuEventRecord");
    return rc;
}

ft_status ft__time_race(const ft_cuda *cu, int n, const ft_launch_fn *fn, void *const *ud, const ft_timing_opts *o,
                        int rounds, ft_timing *out, ft_err *err)
{
    ft_status rc;
    CUstream stream = NULL;
    CUdeviceptr flush = 0;
    CUevent *ev = NULL, ends[2] = {NULL, NULL};
    double *xs = NULL, sum_call = 0;
    size_t nev = 0, want;
    int reps, i, r, t;
    float f = 0;

    if (n < 1 || n > FT_RACE_MAX || rounds < 1)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "a race of %d pieces in %d rounds (1 to %d pieces)", n, rounds,
                        FT_RACE_MAX);
    memset(out, 0, (size_t)n * rounds * sizeof *out);
    rc = ft__cuda_check(cu, cu->p_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), err, "cuStreamCreate");
    if (rc == FT_OK && o->flush_bytes > 0)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&flush, o->flush_bytes), err, "allocating the L2 flush buffer");
    for (i = 0; rc == FT_OK && i < 2; i++)
        rc = ft__cuda_check(cu, cu->p_cuEventCreate(&ends[i], CU_EVENT_DEFAULT), err, "cuEventCreate");
    if (rc != FT_OK)
        goto out;
    /* Warm-up, each piece on its own: module load, first-launch costs; its time per call. */
    for (i = 0; i < n; i++) {
        double warm = 0;
        int calls = 0;
        while (calls < 3 || warm < o->warmup_ms / n) {
            if ((rc = enqueue_turns(cu, 1, &fn[i], &ud[i], stream, 0, 0, 0, 1, 0, NULL, ends, err)) != FT_OK ||
                (rc = ft__cuda_check(cu, cu->p_cuEventSynchronize(ends[1]), err, "running the kernel")) != FT_OK ||
                (rc = ft__cuda_check(cu, cu->p_cuEventElapsedTime(&f, ends[0], ends[1]), err, "cuEventElapsedTime")) !=
                    FT_OK)
                goto out;
            warm += f;
            if (++calls > 10000)
                break;
        }
        sum_call += warm / calls;
    }
    reps = sum_call > 0 ? (int)(n * o->budget_ms / sum_call) : o->max_reps;
    reps = reps < o->min_reps ? o->min_reps : reps > o->max_reps ? o->max_reps : reps;
    /* Heat: batches of turns, each timed as a whole, until the clock has settled. */
    if (o->heat_ms > 0) {
        int batch = sum_call > 0 ? (int)(FT_HEAT_BATCH_MS / sum_call) : 1;
        double heated = 0, prev = 0, cur;
        batch = batch < 1 ? 1 : batch;
        for (t = 0;; t += batch) {
            if ((rc = enqueue_turns(cu, n, fn, ud, stream, flush, o->flush_bytes, t, batch, 0, NULL, ends, err)) !=
                    FT_OK ||
                (rc = ft__cuda_check(cu, cu->p_cuEventSynchronize(ends[1]), err, "running the kernel")) != FT_OK ||
                (rc = ft__cuda_check(cu, cu->p_cuEventElapsedTime(&f, ends[0], ends[1]), err, "cuEventElapsedTime")) !=
                    FT_OK)
                goto out;
            heated += f;
            cur = f / batch;
            if (f <= 0 || ft__heat_done(heated, prev, cur, o->heat_ms))
                break;
            prev = cur;
        }
    }
    /* The rounds, queued as one: events for every piece of every turn. */
    want = (size_t)2 * n * reps * rounds;
    ev = calloc(want, sizeof *ev);
    xs = calloc((size_t)reps, sizeof *xs);
    if (ev == NULL || xs == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    for (nev = 0; nev < want; nev++)
        if ((rc = ft__cuda_check(cu, cu->p_cuEventCreate(&ev[nev], CU_EVENT_DEFAULT), err, "cuEventCreate")) != FT_OK)
            goto out;
    for (r = 0; r < rounds; r++)
        if ((rc = enqueue_turns(cu, n, fn, ud, stream, flush, o->flush_bytes, 0, reps, r,
                                ev + (size_t)2 * n * reps * r, NULL, err)) != FT_OK)
            goto out;
    rc = ft__cuda_check(cu, cu->p_cuStreamSynchronize(stream), err, "running the kernel");
    for (r = 0; rc == FT_OK && r < rounds; r++)
        for (i = 0; rc == FT_OK && i < n; i++) {
            const CUevent *e = ev + (size_t)2 * n * reps * r;
            for (t = 0; t < reps; t++) {
                rc = ft__cuda_check(cu, cu->p_cuEventElapsedTime(&f, e[2 * ((size_t)t * n + i)],
                                                                 e[2 * ((size_t)t * n + i) + 1]),
                                    err, "cuEventElapsedTime");
                if (rc != FT_OK)
                    break;
                xs[t] = f;
            }
            if (rc == FT_OK)
                ft__timing_summarise(xs, reps, &out[i * rounds + r]);
        }
out:
    for (; nev > 0; nev--)
        cu->p_cuEventDestroy(ev[nev - 1]);
    for (i = 0; i < 2; i++)
        if (ends[i] != NULL)
            cu->p_cuEventDestroy(ends[i]);
    free(ev);
    free(xs);
    if (flush != 0)
        cu->p_cuMemFree(flush);
    if (stream != NULL) {
        cu->p_cuStreamSynchronize(stream);
        cu->p_cuStreamDestroy(stream);
    }
    if (rc != FT_OK)
        memset(out, 0, (size_t)n * rounds * sizeof *out);
    return rc;
}

ft_status ft__time(const ft_cuda *cu, ft_launch_fn fn, void *ud, const ft_timing_opts *o, ft_timing *out,
                   ft_err *err)
{
    return ft__time_race(cu, 1, &fn, &ud, o, 1, out, err);
}
