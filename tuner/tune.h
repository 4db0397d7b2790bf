/* The tuner: for one GPU model, measure every variant of the specs on every workload bucket
 * and keep every result in the tuning database. */
#ifndef FT_TUNER_TUNE_H
#define FT_TUNER_TUNE_H

#include "common/error.h"
#include "generator/spec.h"
#include "tuning_db/db.h"

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
} ft_tune_opts;

typedef struct ft_tune_summary {
    int buckets;
    int misses;              /* with misses: the missed buckets found for this GPU model */
    int variants;            /* compiled variants of the spec(s) */
    int pruned;
    long long measured;      /* measurements made in this run */
    long long resumed;       /* skipped: already in the database */
    long long by_status[FT_RESULT_TIMEOUT + 1];
    int winners;
    int races;               /* buckets whose leaders were re-measured interleaved */
    int worker_restarts;
    double compile_ms, verify_ms, time_ms, wall_ms;
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

#endif
