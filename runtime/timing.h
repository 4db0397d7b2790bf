/* Timing GPU work with CUDA events: warm-up, many repetitions, the L2 flushed before each,
 * median and spread. */
#ifndef FT_RUNTIME_TIMING_H
#define FT_RUNTIME_TIMING_H

#include "common/error.h"
#include "runtime/driver.h"

typedef struct ft_timing {
    double median_ms;
    double q1_ms, q3_ms;  /* quartiles: the spread is q3 - q1 */
    double min_ms;
    int reps;
} ft_timing;

typedef struct ft_timing_opts {
    double warmup_ms;     /* at least this long of warm-up (and at least 3 calls) */
    double budget_ms;     /* repetitions until about this much kernel time ... */
    int min_reps;         /* ... but at least this many */
    int max_reps;         /* ... and at most this many */
    size_t flush_bytes;   /* L2 flush: a buffer this large is cleared before each repetition */
} ft_timing_opts;

void ft__timing_opts_default(ft_timing_opts *o); /* 25 ms, 200 ms, 10, 200, 256 MiB */

/* The work to time: one call enqueues it on stream. */
typedef ft_status (*ft_launch_fn)(void *ud, CUstream stream, ft_err *err);

/* Times fn on a new stream of the current context. */
ft_status ft__time(const ft_cuda *cu, ft_launch_fn fn, void *ud, const ft_timing_opts *o, ft_timing *out,
                   ft_err *err);

/* Sorts xs and fills median, quartiles and min (n >= 1). */
void ft__timing_summarise(double *xs, int n, ft_timing *out);

#endif
