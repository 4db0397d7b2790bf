/*
 * The tuner's inside, shared by its files (not an interface of flashtune):
 *   tune.c      ft__tune and ft__tune_probe: the whole run
 *   tasks.c     what is measured: plans, targets, groups of buckets, tasks
 *   loop.c      the event loop over the workers
 *   workers.c   the worker processes and their pipes
 *   protocol.c  the worker protocol's lines, parsed and checked
 *   race.c      recording results; the leaders' race, on the bucket's shape and a neighbour
 */
#ifndef FT_TUNER_INTERNAL_H
#define FT_TUNER_INTERNAL_H

#include <sys/types.h>

#include "generator/arch.h"
#include "runtime/compile.h"
#include "tuner/plan.h"
#include "tuner/tune.h"
#include "tuning_db/db.h"

#define RACE_ROUNDS 3
#define MAX_LEADERS 6 /* the fastest within the noise (4 at most, the runner-up at least), the winner of the
                        * bucket's race before (a ranked search's refinement) and the default */
#define MAX_NOISE_LEADERS 4

#define LINE_MAX_BYTES 8192      /* the longest line a worker may send, its newline included */
#define BOOT_TIMEOUT_MS 120e3    /* for the ready line */
#define SEND_TIMEOUT_MS 10e3     /* for a command to go into the worker's pipe */
#define QUIT_GRACE_MS 5e3        /* for a worker told to quit to exit, before it is killed */
#define EXIT_GRACE_MS 1e3        /* for a worker that closed its output to exit, likewise */
#define PROTOCOL_STRIKES 8       /* protocol errors without a good measurement between: give up */
#define SLACK_MS 1e3             /* what a worker's own clock may exceed the tuner's wait by */
#define MIN_MEDIAN_MS 1e-4       /* no kernel launch takes less than 100 ns */
#define MAX_REPS 1000000
#define MAX_FIELDS 16

/* One variant of one spec's plan, with its database row. */
typedef struct kernel_ref {
    int spec;
    int item;
    long long kernel_id;
} kernel_ref;

/* A bucket to measure: its shape and the kernels (indices into the kernel table). */
typedef struct task {
    ft_problem shape;
    ft_key key;      /* the shape's key: what the winner is for */
    int *jobs;
    unsigned char *retried; /* per job: tried once more after a protocol error */
    int njobs;
    int next;        /* next job to send */
    int redo;        /* a job to send again (after a protocol error), or -1 */
    int shape_ready; /* the worker has the shape's inputs and reference */
    int shape_retried;
    int dirty;       /* something was measured: the winner may have changed */
    int stage;       /* halving, ranked: 0 while screening, 1 once the fastest are measured again */
    double *screen;  /* halving, ranked: per job, its screening median (NAN unless ok) */
    int group;       /* its group (tu->groups) */
    int *ranked;     /* once screened (or found measured): its fastest kernels (ft__tuner_rank_task) */
    int nranked;
    int seeded;      /* ranked: its jobs were cut to its neighbours' fastest (or left whole) */
    int failed;      /* the shape could not be set up */
    int held;        /* ranked: measured, its race held for the group's last refinement */
    /* the race of the leaders */
    int race_started;
    int nleaders;
    ft_db_row leaders[MAX_LEADERS];
    double race_ms[MAX_LEADERS][RACE_ROUNDS]; /* NAN where a leader did not race (or the race failed) */
    int race_sent;                 /* the race command went to the worker */
    int race_retried;              /* ... a second time, after a protocol error or a lost command */
    int racing[MAX_LEADERS];       /* ... the leaders it names, in its order */
    int nracing;
    long long race_winner;         /* the kernel id of the race's winner (0: none yet) */
    int default_leader;            /* the leader that is the bucket's built-in default, or -1 */
    /* leaders within each other's measured noise race again on a neighbour: a shape of the same
     * bucket (race.c, ft__tuner_race_decide) */
    ft_problem nb;     /* the neighbour shape */
    int has_nb;        /* the bucket has one (and it could be set up) */
    int nb_started;    /* the workload's rounds were judged: ntied leaders tie */
    int ntied;
    int tied[MAX_LEADERS]; /* indices into leaders */
    int nb_ready;      /* the worker holds the neighbour's inputs and reference */
    int nb_raced;      /* ... it did once: the tied leaders raced there */
    int nb_next;       /* next tied leader to check (verify) there */
    int nb_done;       /* the neighbour's race was sent (or there is none to run) */
    int nb_retried;    /* a check or the race there was sent again (after a protocol error or a lost
                        * command); once per bucket */
    double nb_ms[MAX_LEADERS][RACE_ROUNDS]; /* per tied leader; NAN where it did not race there */
    int nb_racing[MAX_LEADERS]; /* the tied leaders (slots) the neighbour's race names, in its order */
    int nb_nracing;
    unsigned char nb_bad[MAX_LEADERS]; /* 1: the tied leader failed on the neighbour (recorded); 2: its
                                        * check there was lost (a protocol error): it does not race there */
} task;

typedef enum pending { P_NONE, P_READY, P_SHAPE, P_MEASURE, P_RACE, P_NB_SHAPE, P_NB_CHECK, P_NB_RACE } pending;

typedef struct worker {
    int device;
    pid_t pid;                 /* <= 0: no process */
    int to_fd, from_fd;        /* valid while pid > 0 */
    char buf[LINE_MAX_BYTES];  /* what it sent that is not handled yet */
    size_t len;
    pending waiting;
    unsigned long long id;     /* the id of the command in flight */
    unsigned long long ids;    /* ids given out so far (never reused, across restarts too) */
    double sent;               /* when that command was sent (ms on the monotonic clock) */
    double deadline;
    int job;                   /* the job (or race slot) in flight */
    int strikes;               /* protocol errors since its last good measurement */
    int *tasks;                /* indices of its tasks */
    int ntasks, tasks_cap;
    int cur;                   /* its current task */
    int count;                 /* from the ready line: the GPUs its driver sees */
    ft_arch arch;              /* ... the device's limits */
    ft_db_device dev;          /* ... and its fingerprint */
} worker;

/* A bucket to tune: a shape with its dtype and causality. */
typedef struct target {
    const ft_op *op;  /* the operation whose bucket it is */
    ft_workload wl;
    char dtype[8];
    int causal;
    int det;          /* the backward: deterministic gradients */
} target;

typedef struct target_list {
    target *v;
    int n, cap;
} target_list;

/* The buckets that the same variants compute (one spec's targets of one operation, head dim,
 * dtype, causality and determinism) and the pending variants they are the first to need. A
 * tune compiles a group's variants while it measures the group before. */
typedef struct group {
    int spec;
    int *targets;   /* indices into tu->targets[spec].v */
    int ntargets;
    int *items;     /* indices into tu->plans[spec]->items: the first nitems compile */
    int nitems;
    int nall;       /* ranked: the group's items before the ranking cut them (ranked order) */
    int informed;   /* ranked: its candidates came from a measured twin group */
    int compiled;   /* its first nitems items have compiled */
    int measured;   /* its tasks for those were measured (a ranked search may measure a group
                       early, while another group's refinement compiles) */
    int hold_race;  /* ranked: its buckets' races wait for its last refinement (a race before it
                       would be run again with the new variants among the leaders) */
    int rounds;     /* ranked: its refinements so far */
} group;

/* Compiling ahead into the cache (tuner/prefetch.c). */
typedef struct ft_prefetch ft_prefetch;

/* A tune's timeline of spans (tuner/timeline.c). */
typedef struct ft_timeline ft_timeline;

typedef struct tuner {
    const ft_tune_opts *o;     /* NULL for a probe */
    ft_spec *const *specs;
    int nspecs;
    ft_plan **plans;
    ft_db *db;
    ft_cache *cache;
    ft_arch arch;
    ft_db_device dev;
    long long device_id;
    target_list *targets;      /* per spec: its buckets (ft__tuner_targets) */
    kernel_ref *kernels;       /* the compiled variants so far (room for every plan item) */
    int nkernels;
    group *groups;
    int ngroups;
    long long to_compile;      /* pending variants over all plans */
    task *tasks;
    int ntasks, tasks_cap;
    worker *workers;
    int nworkers;
    char worker_path[4096];
    char cache_dir[4096];
    ft_tune_summary *sum;
    ft_tune_progress_fn progress;
    void *ud;
    long long planned, done;
    ft_prefetch *prefetch;     /* ranked: the refinements' compilations ahead, or NULL */
    ft_timeline *timeline;     /* --timeline: the spans of work, or NULL */
} tuner;



/* Whether the stop flag (a signal) is set. */
static inline int ft__tuner_stopped(const tuner *tu)
{
    return tu->o != NULL && tu->o->stop != NULL && __atomic_load_n(tu->o->stop, __ATOMIC_RELAXED);
}

/* FT_ERR_INTERRUPTED, saying how much was recorded. */
static inline ft_status ft__tuner_interrupted(const tuner *tu, ft_err *err)
{
    return ft__fail(err, FT_ERR_INTERRUPTED, "interrupted: %lld measurements were recorded",
                    tu->sum != NULL ? tu->sum->measured : 0);
}


/* An answer to a shape command (ok, or error with its message). */
ft_status ft__tuner_parse_ack(const char *line, unsigned long long id, int *ok, char *msg, size_t cap, ft_err *err);

/* The ready line: how many GPUs, the device's limits and fingerprint. */
ft_status ft__tuner_parse_ready(const char *line, int *count, ft_arch *arch, ft_db_device *dev, ft_err *err);

/* Starts a worker and waits for its ready line. */
ft_status ft__tuner_worker_boot(tuner *tu, worker *w, ft_err *err);

/* The next whole line a worker sent: 1; 0 when none is complete; -1 on a protocol error (why). */
int ft__tuner_worker_line(worker *w, char *out, size_t cap, char *why, size_t why_cap);

/* Reads what a worker sent into its buffer: 1, 0 at end of file, -1 on an error. */
int ft__tuner_worker_read(worker *w);

/* Waits up to grace_ms for a worker to exit, then kills it; its status. */
int ft__tuner_worker_reap(const tuner *tu, worker *w, double grace_ms);

/* Sends one command line: 1 when it went into the pipe in time. */
int ft__tuner_worker_send(const tuner *tu, worker *w, const char *line, double timeout_ms);

/* Tells a worker to quit (or kills it), reaps it. */
void ft__tuner_worker_stop(const tuner *tu, worker *w, int kill_it);

/* A result of task t's kernel kr with status st. */
void ft__tuner_fill_result(tuner *tu, const task *t, const kernel_ref *kr, ft_result_status st, const char *reason, ft_db_result *r);

/* Commits a result. */
ft_status ft__tuner_record(tuner *tu, const ft_db_result *r, ft_err *err);

/* A measurement of job j of task t arrived. */
ft_status ft__tuner_on_result(tuner *tu, task *t, int j, const ft_tune_reply *rep, ft_err *err);

/* The variants of the built-in defaults that the runtime would run for task t's bucket without
 * a tuned winner (its family's, in the order it would try them), as the plan writes variants;
 * returns how many (at most cap). */
int ft__tuner_task_defaults(const tuner *tu, const task *t, char (*out)[512], int cap);

/* The race's runners: the ok results within the noise of the fastest (4 at most; the runner-up
 * whatever its time), the winners of the bucket's earlier races in this tune, and the bucket's
 * built-in default where it was measured. */
ft_status ft__tuner_find_leaders(tuner *tu, task *t, ft_err *err);

/* Records the medians of the race's rounds and decides the bucket's winner: the race's fastest,
 * or the one the neighbour decided for. */
ft_status ft__tuner_finish_race(tuner *tu, task *t, ft_err *err);

/* The workload's rounds are in: the leaders within each other's noise (t->tied, t->ntied; fewer
 * than 2: the race is over) and whether they race again on the neighbour (returns 1). */
int ft__tuner_judge_race(task *t);

/* The race's decision, from n leaders' rounds on the workload (w) and on the neighbour (nb, NULL
 * when not raced there; NAN where a round failed), leaders in the order they were ranked. The
 * fastest by the median of its workload rounds wins when every other is slower by more than the
 * spread of either one's rounds (max − min: the noise the interleaved rounds measured). Among
 * those within it, the neighbour decides: the least geometric mean over the two shapes of the
 * median relative to the fastest of them on that shape (a leader without every round on both
 * shapes takes no part). Returns the winner's index, -1 when no leader has all its workload
 * rounds; *tied gets which leaders tie with the fastest (the fastest too), *ntied their count. */
int ft__tuner_race_decide(int n, const double (*w)[RACE_ROUNDS], const double (*nb)[RACE_ROUNDS], int *tied,
                          int *ntied);

/* A shape of t's bucket other than its workload: sequences of 11/16 the length (the keys', and
 * the queries' where they are as many), a multiple of 8; 0 when that leaves the bucket. */
int ft__tuner_neighbour_shape(const ft_problem *p, const ft_key *key, ft_problem *out);

/* Task t's ranking (t->ranked): the kernels of spec `spec` in the table that have an ok result
 * for its bucket in the database (this run's screening, or an earlier tune's), fastest first,
 * 64 at most. */
ft_status ft__tuner_rank_task(tuner *tu, task *t, int spec, ft_err *err);

/* The index of a kernel row in the kernel table, or -1. */
int ft__tuner_kernel_of(const tuner *tu, long long kernel_id);

/* The database row of a planned variant. */
void ft__tuner_kernel_row(const ft_plan *plan, const ft_plan_item *it, const char *template_hash, ft_db_kernel *k);

/* Whether task i is the first of its key (specs of two families can share one). */
int ft__tuner_first_of_bucket(const tuner *tu, int i);

/* Reports the winner of a finished task. */
ft_status ft__tuner_store_winner(tuner *tu, task *t, ft_err *err);

/* Reports progress. */
void ft__tuner_progress(tuner *tu, const char *what);

/* The event loop: until every task is done or the tune stops. */
ft_status ft__tuner_run_workers(tuner *tu, ft_err *err);

/* Starts one worker per GPU and shares the tasks among them. */
ft_status ft__tuner_start_workers(tuner *tu, ft_err *err);

/* Each spec's buckets into tu->targets: the misses when there are any, else the spec's
 * workloads crossed with its dtypes, causal and det values (and, for a head dim that --only asks
 * for and no workload has, the workloads of the nearest one). */
ft_status ft__tuner_targets(tuner *tu, const target_list *misses, ft_err *err);

/* Plans every spec for the GPU, the variants that fit it and compute one of its buckets
 * (tu->targets) left pending; the kernel table allocated for them. */
ft_status ft__tuner_plan_all(tuner *tu, ft_variant *filter, unsigned *masks, ft_err *err);

/* The targets in groups computed by the same variants (tu->groups), each pending variant in the
 * first group that measures it. */
ft_status ft__tuner_make_groups(tuner *tu, ft_err *err);

/* After a group's variants from its item `from` on have compiled: their kernels registered, one
 * task per target (from > 0, a ranked search's refinement: tasks that measure those only). */
ft_status ft__tuner_group_tasks(tuner *tu, int g, int from, ft_err *err);

/* Ranked search: whether group n should wait for group g's measurements before its candidates
 * are chosen (and compiled): g is n's twin and no other twin of n has been measured. */
int ft__tuner_await_twin(const tuner *tu, int n, int g);

/* Ranked search, at group g's turn: the first group after g that no measurement can inform (no
 * twin of it comes before it, so its candidates are the prior's whenever they are chosen) and
 * is compiled (compiled 1) or not yet (compiled 0), and not measured; or -1. Such a group can
 * compile, and be measured, ahead of its turn (it is refined in its turn). */
int ft__tuner_independent_after(const tuner *tu, int g, int compiled);

/* Ranked search, at group g's turn: whether a twin of group n that comes before n lies after g
 * (measured ahead of its turn, not yet refined): n's candidates cannot be chosen yet. */
int ft__tuner_twin_unsettled(const tuner *tu, int n, int g);

/* Ranked search, after group g (candidates from the prior, not a twin) was measured: its
 * uncompiled variants one step from one of a bucket's FT_TUNE_RANK_CLIMB fastest join its items
 * (*more: how many; 0 when none is left or the group's candidates came from a twin). */
ft_status ft__tuner_refine_group(tuner *tu, int g, int *more, ft_err *err);

/* Steps between two variants of a spec: per integer parameter how many values apart they are in
 * ascending order, per string parameter 1 where they differ (tasks.c). */
int ft__tuner_steps(const ft_spec *spec, const ft_variant *a, const ft_variant *b);

/* Ranked search, once task t's fastest are known (t->ranked): what they choose to compile
 * next, handed to tu->prefetch (ft__tuner_prefetch_item): where t's group is to be refined, the
 * variants its refinement takes for t's bucket (one step from one of t's FT_TUNE_RANK_CLIMB
 * fastest); for each twin group not compiled yet, the twins of t's FT_TUNE_RANK_TWIN fastest
 * (its candidates, ft__tuner_rank_group). */
void ft__tuner_prefetch(tuner *tu, const task *t);

/* Item `item` of spec's plan generated here and queued to compile into the cache, unless it
 * was (prefetched) or is no longer pending; without tu->prefetch nothing. */
void ft__tuner_prefetch_item(tuner *tu, int spec, int item);

/* The prefetch's threads (threads of them, FT_PREFETCH_THREADS at most; *out NULL where none
 * could be made: the tune compiles as before), compiling into cache, each compilation a span
 * "ahead" of timeline (may be NULL). */
ft_status ft__prefetch_start(ft_prefetch **out, ft_cache *cache, int threads, volatile int *stop, ft_timeline *timeline,
                             ft_err *err);
/* Queues one source (taken over: freed once compiled) whose kernel is named entry, for arch. */
ft_status ft__prefetch_add(ft_prefetch *pf, char *text, const char *entry, const char *arch, ft_err *err);
/* Waits until the queued sources of the n kernels named in entries have compiled, those still
 * waiting moved to the front of the queue (the others compile on meanwhile and after); n < 0:
 * until every queued source has. */
void ft__prefetch_drain(ft_prefetch *pf, const char *const *entries, int n);
/* Drops the waiting sources of the n kernels named in entries (a compilation of their own
 * takes them; those compiling already go on). */
void ft__prefetch_take(ft_prefetch *pf, const char *const *entries, int n);
/* Drops what waits, joins the threads, adds their counts to sum (may be NULL), frees pf. */
void ft__prefetch_stop(ft_prefetch *pf, ft_tune_summary *sum);

/* The timeline at path (*out NULL when path is NULL: nothing recorded), its times counted from
 * t0_ms (ft__now_ms). */
ft_status ft__timeline_open(const char *path, double t0_ms, ft_timeline **out, ft_err *err);
/* One span of work as a JSON line: what ("compile", "ahead", ...), label (the group or kernel),
 * start and end (ft__now_ms), n (what it handled). Thread-safe; tl NULL: nothing. */
void ft__timeline_span(ft_timeline *tl, const char *what, const char *label, double start_ms, double end_ms, int n);
/* Closes and frees tl (NULL: nothing); FT_ERR_IO if a line could not be written. */
ft_status ft__timeline_close(ft_timeline *tl, ft_err *err);

/* Ranked search: group g's items ordered by the prior and cut to its candidates (before they
 * compile; tuner/tune.h, ft_search). */
ft_status ft__tuner_rank_group(tuner *tu, int g, ft_err *err);

/* Ranked search, before task t's shape is set up: a bucket whose twin group of its causality
 * ranked its shape keeps only the twins of that bucket's FT_TUNE_RANK_TWIN fastest; else one
 * between the smallest and the largest of its group keeps only the jobs among the
 * FT_TUNE_RANK_NEXT fastest of the nearest screened bucket of the group on either side. A
 * bucket left with FT_TUNE_KEEP jobs or fewer is not screened. */
void ft__tuner_seed_task(tuner *tu, task *t);

/* Ranked search, after the plans: each spec's buckets that a spec of a newer family of the
 * same operation has too and a kept variant of it computes, left out of its targets (those it
 * has a kept variant for counted in the summary's left_to_newer), and the variants only those
 * buckets needed left out of its plan. */
void ft__tuner_leave_to_newer(tuner *tu);

/* The buckets the runtime library recorded as misses on this GPU model. */
ft_status ft__tuner_miss_targets(tuner *tu, target_list *l, ft_err *err);

#endif
