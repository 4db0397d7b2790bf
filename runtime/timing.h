/* Timing GPU work with CUDA events: warm-up, many repetitions, the L2 flushed before each,
 * median and spread.
 *
 * The H200 runs at 1980 MHz when idle and under light load, and under a heavy kernel its power
 * management lowers the clock within 50-100 ms of sustained load (to 1680-1830 MHz at 690 W on
 * the project's machine, 2026-12-03): a kernel timed right after an idle spell reads up to 10 %
 * faster than the same kernel timed a moment later. heat_ms runs the work that long first, queued
 * back to back as in the timing, so that every candidate is timed at the clock it would run at. */
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
    double heat_ms;       /* then at least this long of sustained load, in batches of about
                           * FT_HEAT_BATCH_MS, until two successive batches agree within
                           * FT_HEAT_AGREE (at most FT_HEAT_EXTRA_MS longer); 0: none */
    double budget_ms;     /* repetitions until about this much kernel time ... */
    int min_reps;         /* ... but at least this many */
    int max_reps;         /* ... and at most this many */
    size_t flush_bytes;   /* L2 flush: a buffer this large is cleared before each repetition */
} ft_timing_opts;

#define FT_HEAT_MS 150.0       /* the heat a timing after an idle spell takes (worker, flashtune run) */
#define FT_RACE_HEAT_MS 100.0  /* ... and a race right after other timings (the worker's race command) */
/* The load a GPU at its power limit needs before it times as it does under sustained work: an
 * H100 (700 W) ran the d = 64 forward at 8k 3-4 % faster for the first 0.8 s after an idle spell
 * than from 1 s on, its clock falling from 1980 to 1550-1650 MHz as the power reached the limit;
 * a timing that stops heating while the two batches agree stops on that early plateau
 * (bench/sustain.py, 2026-12-05). `flashtune run` heats this long by default (after 1000 ms it
 * read 2.106-2.140 ms, after 2000 ms 2.152-2.196, after 3000 ms 2.165; sustained: 2.165). A
 * tune's races do not: heated until the worker had timed for a second without a pause
 * (ebf272e), they cost the default tune 18 s and their records agreed no better with a later
 * re-measurement (the clock wanders by up to 9 % over seconds at the limit, settled or not). */
#define FT_SETTLE_MS 2000.0
#define FT_HEAT_BATCH_MS 10.0
#define FT_HEAT_AGREE 0.01
#define FT_HEAT_EXTRA_MS 500.0

void ft__timing_opts_default(ft_timing_opts *o); /* 25 ms, no heat, 200 ms, 10, 200, 256 MiB */

/* The heat phase's stop rule: heated_ms of load so far, prev_ms and cur_ms the per-call times of
 * the last two batches (prev_ms 0: only one so far). */
int ft__heat_done(double heated_ms, double prev_ms, double cur_ms, double heat_ms);

/* The work to time: one call enqueues it on stream. */
typedef ft_status (*ft_launch_fn)(void *ud, CUstream stream, ft_err *err);

/* Times n pieces of work (fn[i] on ud[i], n <= FT_RACE_MAX) against each other on a new stream
 * of the current context: each warmed up on its own, then the heat (o->heat_ms, every piece in
 * turn), then `rounds` rounds, each of reps turns in which every piece runs once after the L2
 * flush, the order rotating from turn to turn and round to round, all queued back to back:
 * every piece is timed at the same sustained clock, and a drift of the clock falls on all
 * alike. A piece gets about o->budget_ms of repetitions a round (o->min_reps to o->max_reps
 * turns). out[i * rounds + r]: piece i's timing in round r (zeroed on failure). */
#define FT_RACE_MAX 8
ft_status ft__time_race(const ft_cuda *cu, int n, const ft_launch_fn *fn, void *const *ud, const ft_timing_opts *o,
                        int rounds, ft_timing *out, ft_err *err);

/* Times fn alone: a race of one piece in one round. */
ft_status ft__time(const ft_cuda *cu, ft_launch_fn fn, void *ud, const ft_timing_opts *o, ft_timing *out,
                   ft_err *err);

/* Sorts xs and fills median, quartiles and min (n >= 1). */
void ft__timing_summarise(double *xs, int n, ft_timing *out);

#endif
