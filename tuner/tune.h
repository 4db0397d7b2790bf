/* The tuner: for one GPU model, measure every variant of the specs on every workload bucket
 * and keep every result in the tuning database. */
#ifndef FT_TUNER_TUNE_H
#define FT_TUNER_TUNE_H

#include <stdint.h>

#include "common/error.h"
#include "generator/spec.h"
#include "ops/op.h"
#include "ops/problem.h"
#include "tuning_db/db.h"

/* How a tune chooses what to measure.
 *   exhaustive  every variant of every bucket at the whole budget (the oracle);
 *   halving     every variant of a bucket timed at a quarter of the budget (FT_TUNE_SCREEN_MS at
 *               least), the fastest quarter of them (FT_TUNE_KEEP at least) again at the whole
 *               budget;
 *   ranked      halving over fewer variants, chosen before they compile (tuner/tasks.c,
 *               ft__tuner_rank_group). A group's twins are the groups of its spec and head dim
 *               with one of dtype, determinism and causality different. Where one was measured,
 *               the group's candidates are the twins of the variants among the
 *               FT_TUNE_RANK_TWIN fastest of one of its buckets (the better placed first, the
 *               built-in defaults after them, FT_TUNE_RANK_NEXT to FT_TUNE_RANK_FIRST of them;
 *               with a twin of its causality, those twins only, at most FT_TUNE_RANK_FIRST),
 *               and a bucket whose shape a twin of its causality measured takes only the twins
 *               of that bucket's FT_TUNE_RANK_TWIN fastest; else the FT_TUNE_RANK_FIRST of
 *               the prior (half the nearest to the built-in defaults of runtime/defaults.c in
 *               parameter steps, then each time the farthest from those chosen), and such a
 *               group is refined `refinements` times at most (FT_TUNE_RANK_ROUNDS unless
 *               `tune --refinements` says otherwise): the uncompiled variants one
 *               step from one of a bucket's FT_TUNE_RANK_CLIMB fastest compile and are measured
 *               on every bucket. Only candidates compile; a group whose only twin is the group
 *               measured right before it compiles after it. The group's smallest and largest
 *               buckets screen every candidate, each one between them the FT_TUNE_RANK_NEXT
 *               fastest of the nearest measured bucket on either side; a bucket of
 *               FT_TUNE_KEEP candidates or fewer is measured at the whole budget at once. A
 *               bucket that a kept variant of a newer family's spec computes too (the sm_90a
 *               forward's, on an H200) is left to it. */
typedef enum ft_search { FT_SEARCH_EXHAUSTIVE, FT_SEARCH_HALVING, FT_SEARCH_RANKED } ft_search;

typedef struct ft_tune_opts {
    const char *db_path;     /* NULL: the default database */
    int device;              /* GPU ordinal; -1: every GPU, sharing the buckets (identical GPUs only) */
    const char *cache_dir;   /* NULL: the default compile cache (required: workers read it) */
    int jobs;                /* parallel compilations; 0: one per core */
    const char *only;        /* a variant filter ("d=128,causal=1"), or NULL */
    int budget_ms;           /* timing budget per measurement (default 30) */
    int quiet;
    int remeasure;           /* measure again what the database already has */
    volatile int *stop;      /* set by a signal handler: stop cleanly */
    const char *worker_cmd;  /* NULL: this executable's "worker" command; tests use a fake */
    double timeout_s;        /* per measurement before a worker counts as hung (default 60) */
    int skip_unsupported;    /* leave out specs whose kernel family cannot run on the GPU (the
                                built-in set: the sm_90a family only on compute capability 9.0) */
    int misses;              /* tune the buckets the runtime library recorded as misses on this
                                GPU model (ft__db_misses) instead of the specs' workloads */
    ft_search search;        /* how the variants of a bucket are chosen and measured (ft_search) */
    int one_shape;           /* near-ties decided on the bucket's own shape only (no neighbour) */
    int prefetch_all;        /* ranked: a compilation waits for every compilation queued ahead;
                                0 (the default): only for its own variants' jobs ahead (moved to
                                the front of the queue), and one made while the GPU measures takes
                                its waiting ones over (tuner/prefetch.c) */
    const char *timeline_path; /* NULL, or a file for the tune's spans of work, one JSON line
                                  each (tuner/timeline.c) */
    int refinements;         /* ranked: refinements of a group no twin informs, at most (0 to
                                FT_TUNE_RANK_ROUNDS_MAX; cmd_tune's default FT_TUNE_RANK_ROUNDS) */
} ft_tune_opts;

#define FT_TUNE_SCREEN_MS 5 /* the screening budget's floor (ms) */
#define FT_TUNE_CHECK_MS 1  /* the budget of a measurement whose time is not used (a check) */
#define FT_TUNE_KEEP 4      /* variants a bucket's screening keeps at least */
#define FT_TUNE_RANK_FIRST 16 /* ranked: candidates of a group no measured group informs (the
                                 most of one that a twin informs) */
#define FT_PREFETCH_THREADS 64 /* ranked: threads compiling refinements ahead, at most */
#define FT_TUNE_RANK_ROUNDS 2 /* ranked: refinements of such a group by default ... */
#define FT_TUNE_RANK_ROUNDS_MAX 4 /* ... and at most (`tune --refinements`) */
#define FT_TUNE_RANK_CLIMB 2  /* ... from the neighbours of each bucket's this many fastest */
#define FT_TUNE_RANK_TWIN 4   /* ranked: a twin's variant among this many fastest of a bucket */
#define FT_TUNE_RANK_NEXT 8   /* ranked: a middle bucket's variants from each measured neighbour;
                                 also the fewest candidates of a group informed by its twin */

typedef struct ft_tune_summary {
    int buckets;
    int misses;              /* with misses: the missed buckets found for this GPU model */
    int misses_invalid;      /* ... and the recorded misses skipped for an invalid shape */
    int variants;            /* compiled variants of the spec(s) */
    int pruned;
    long long measured;      /* measurements made in this run */
    long long resumed;       /* skipped: already in the database */
    long long by_status[FT_RESULT_TIMEOUT + 1];
    int winners;
    int races;               /* races of a bucket's leaders (a ranked search's refinement races again) */
    int ties;                /* ... whose leaders stayed within the noise the rounds measured, and
                                raced again on a neighbouring shape of the bucket */
    int decided;             /* ... where that shape decided for another than the workload's fastest */
    int over_default;        /* races whose winner and the bucket's built-in default both finished their
                                rounds: the default's median over the winner's, in the same race (a
                                speed-up that the board's state, which moves absolute figures by
                                several per cent from one moment to the next, falls on alike) ... */
    double over_default_log; /* ... its logarithms summed (the geometric mean's), ... */
    double over_default_min, over_default_max; /* ... the least and the most */
    int ranked_out;          /* ranked: variants the ranking left uncompiled */
    int left_to_newer;       /* ranked: buckets left to a spec of a newer family */
    int prefetched;          /* ranked: variants compiled ahead, a refinement's or a twin group's,
                                while others were measured (tuner/prefetch.c) ... */
    double prefetch_ms;      /* ... their compile time, summed over the threads ... */
    double prefetch_wait_ms; /* ... and what the tune waited for them to end before a compilation
                                the GPU waited for anyway (not in compile_ms) */
    long long screened;      /* halving, ranked: measurements at the screening budget ... */
    long long kept;          /* ... and the ones measured again at the whole budget */
    int worker_restarts;
    int protocol_errors;     /* replies that broke the worker protocol (each one restarts the worker) */
    double compile_ms, verify_ms, time_ms, wall_ms;
    double compile_wait_ms;  /* of compile_ms, what the measurements waited for (the first group's
                                compilation, and any that took longer than the group before it
                                took to measure); the rest ran while the GPU was timing */
    double setup_ms;         /* the workers' replies, as the tuner waited for them: shapes set up
                                (inputs and the reference), ... */
    double measure_ms;       /* ... measurements (loading, verifying and timing a kernel), ... */
    double race_ms;          /* ... and the leaders' interleaved rounds; on several GPUs these add
                                up over the workers */
    int interrupted;         /* the tune was stopped (a signal) before it finished */
    char device_name[128];
    char db_path[4096];
} ft_tune_summary;

/* Progress: measurements done and planned (excluding what was resumed). */
typedef void (*ft_tune_progress_fn)(void *ud, long long done, long long total, const char *what);

ft_status ft__tune(ft_spec *const *specs, int nspecs, const ft_tune_opts *o, ft_tune_progress_fn progress,
                   void *ud, ft_tune_summary *summary, ft_err *err);

/* The fingerprint of GPU `device` as tune records it, read from a worker's ready line
 * (worker_cmd and cache_dir as in ft_tune_opts). Fails when there is no GPU (the worker's
 * message says why). */
ft_status ft__tune_probe(const char *worker_cmd, const char *cache_dir, int device, ft_db_device *dev, ft_err *err);

/* The worker's main loop (flashtune worker --device N); returns the exit status. */
int ft__worker_main(int device, const char *cache_dir);

/* ---- the worker protocol (tuner/worker.c has the whole of it) ------------------------------ */

/* The largest tensor the tuner sets up: 2^40 elements. */
#define FT_TUNE_MAX_ELEMENTS ((unsigned long long)1 << 40)

/* Checks a shape before the tuner or its worker uses it (a spec's workload, a recorded miss, a
 * shape command): the sizes positive, hq a multiple of hkv (ft__problem_validate), the head
 * dim a multiple of 8 from 8 to 1024, sequence lengths and batch·heads at most 2^30, every
 * tensor at most FT_TUNE_MAX_ELEMENTS elements (no size computed from it overflows).
 * FT_ERR_INVALID_ARGUMENT with the reason. */
ft_status ft__tune_check_shape(const ft_problem *p, ft_err *err);

/* The worker's reading of a shape command ("shape id=N op=fwd|bwd b=.. hq=.. hkv=.. sq=.. sk=..
 * d=.. causal=0|1 bf16=0|1 det=0|1 seed=.."): every field whole and in range, the operation one
 * flashtune has, and the shape passing ft__tune_check_shape: the worker refuses what the tuner
 * should never have sent. */
ft_status ft__worker_parse_shape(const char *line, const ft_op **op, ft_problem *p, uint64_t *seed, ft_err *err);

/* The part of a shape's problem p that the worker verifies its kernels on, where the fp32
 * reference of the whole would see more than 2^26 scores (seconds on the largest buckets):
 * one or two sequences and one or two K/V heads with their query heads, as many as keep it
 * within that; the same sequence lengths, head dim, causality, grouping, dtype and layout. The
 * kernels are timed on the whole. Returns 0 (part = p) when the whole is small enough. */
int ft__worker_verify_part(const ft_problem *p, ft_problem *part);

/* A worker's answer to a measure command, checked. */
typedef struct ft_tune_reply {
    ft_result_status status;  /* ok, wrong_result, launch_failure, fault ("error": launch_failure) */
    double median_ms, q1_ms, q3_ms;
    double max_error;         /* relative L2 error of O; NAN when not finite (a wrong result) */
    double lse_error;
    double verify_ms, time_ms;
    double tflops;            /* of the median on the shape; NAN unless ok */
    int reps, registers, local_bytes;
    char detail[512];
} ft_tune_reply;

/* Parses a worker's "result" line for the command with id `id`, measured on `shape` of
 * operation op (its FLOPs and tolerance), that the tuner has waited elapsed_ms for. Every field must come once, none may be unknown, numbers
 * must be whole and plausible: for an ok result a finite median of at least 10^-4 ms with
 * q1 <= median <= q3, at most FT_TUNE_MAX_TFLOPS on the shape, 1 to 10^6 repetitions, a
 * finite error within the dtype's tolerance, and no more time spent (median, verify_ms,
 * time_ms) than the tuner waited plus a second. Anything else is FT_ERR_CORRUPT, the message
 * saying what is wrong; *out is filled only on success. */
#define FT_TUNE_MAX_TFLOPS 1e4
ft_status ft__tune_parse_result(const char *line, unsigned long long id, const ft_op *op, const ft_problem *shape,
                                double elapsed_ms, ft_tune_reply *out, ft_err *err);

/* A worker's answer to a race command of n kernels in `rounds` rounds. */
#define FT_TUNE_RACE_KERNELS 8 /* kernels a race command may name (at most FT_RACE_MAX) */
#define FT_TUNE_RACE_ROUNDS 8  /* rounds it may ask for */
typedef struct ft_race_reply {
    ft_result_status status; /* ok, launch_failure ("error" too) or fault */
    double ms[FT_TUNE_RACE_KERNELS * FT_TUNE_RACE_ROUNDS]; /* ok: kernel i's median in round r at [i * rounds + r] */
    double time_ms;
    char detail[512];
} ft_race_reply;

/* Parses a worker's "raced" line likewise: id, status, time_ms, and for an ok one exactly the
 * fields ms0 .. ms<n-1>, each of `rounds` medians separated by commas, every one plausible as
 * a result's median is; then detail. FT_ERR_CORRUPT when anything is wrong. */
ft_status ft__tune_parse_race(const char *line, unsigned long long id, const ft_op *op, const ft_problem *shape,
                              int n, int rounds, double elapsed_ms, ft_race_reply *out, ft_err *err);

#endif
