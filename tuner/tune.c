/*
 * The tuner's parent process.
 *
 * It plans and compiles (NVRTC on a thread pool, through the compile cache), keeps the
 * database, and drives one worker process per GPU (tuner/worker.c) that verifies and times
 * kernels. Each measurement is committed as soon as it arrives, so an interrupted tune loses
 * at most the measurement in flight, and the next tune skips what is already recorded. A worker
 * that faults, dies or stops answering is replaced and the kernel that did it is recorded as a
 * fault or a timeout. The parent itself never touches the GPU, so nothing a kernel does can
 * take it down.
 *
 * Per bucket: the shape is set up once (inputs, reference), every variant is measured, and when
 * the fastest variants lie within each other's noise they are re-measured interleaved, a few
 * rounds, and the median of the rounds decides.
 */
#include "tune.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/compile.h"
#include "ops/problem.h"
#include "tuner/plan.h"

extern char **environ;

#define RACE_ROUNDS 3
#define MAX_LEADERS 4

/* One variant of one spec's plan, with its database row. */
typedef struct kernel_ref {
    int spec;
    int item;
    long long kernel_id;
} kernel_ref;

/* A bucket to measure: its shape and the kernels (indices into the kernel table). */
typedef struct task {
    ft_problem shape;
    ft_db_bucket bucket;
    int *jobs;
    int njobs;
    int next;        /* next job to send */
    int shape_ready; /* the worker has the shape's inputs and reference */
    int dirty;       /* something was measured: the winner may have changed */
    int failed;      /* the shape could not be set up */
    /* the race of the leaders */
    int race_started;
    int nleaders;
    ft_db_row leaders[MAX_LEADERS];
    double race_ms[MAX_LEADERS][RACE_ROUNDS];
    int race_next; /* next (round * nleaders + leader) to send */
} task;

typedef enum pending { P_NONE, P_READY, P_SHAPE, P_MEASURE, P_RACE } pending;

typedef struct worker {
    int device;
    pid_t pid;
    int to_fd, from_fd;
    char buf[16384];
    size_t len;
    pending waiting;
    int job;          /* the job (or race slot) in flight */
    double deadline;  /* ms on the monotonic clock */
    int *tasks;       /* indices of its tasks */
    int ntasks;
    int cur;          /* its current task */
    char ready[1024]; /* the ready line */
} worker;

typedef struct tuner {
    const ft_tune_opts *o;
    ft_spec *const *specs;
    int nspecs;
    ft_plan **plans;
    ft_db *db;
    ft_cache *cache;
    ft_arch arch;
    ft_db_device dev;
    long long device_id;
    kernel_ref *kernels;
    int nkernels;
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
} tuner;

/* ---- workers ------------------------------------------------------------------------------ */

static ft_status worker_start(tuner *tu, worker *w, ft_err *err)
{
    int to[2] = {-1, -1}, from[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    char device[16];
    char *argv[8];
    int rc;

    snprintf(device, sizeof device, "%d", w->device);
    argv[0] = tu->worker_path;
    argv[1] = "worker";
    argv[2] = "--device";
    argv[3] = device;
    argv[4] = "--cache-dir";
    argv[5] = tu->cache_dir;
    argv[6] = NULL;
    if (pipe(to) != 0 || pipe(from) != 0)
        return ft__fail(err, FT_ERR_IO, "pipe: %s", strerror(errno));
    fcntl(to[1], F_SETFD, FD_CLOEXEC);
    fcntl(from[0], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    rc = posix_spawn(&w->pid, tu->worker_path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(to[0]);
    close(from[1]);
    if (rc != 0) {
        close(to[1]);
        close(from[0]);
        return ft__fail(err, FT_ERR_IO, "cannot start the worker %s: %s", tu->worker_path, strerror(rc));
    }
    w->to_fd = to[1];
    w->from_fd = from[0];
    w->len = 0;
    w->waiting = P_READY;
    w->deadline = ft__now_ms() + 120e3;
    signal(SIGPIPE, SIG_IGN);
    return FT_OK;
}

static void worker_stop(worker *w, int kill_it)
{
    int status;

    if (w->pid <= 0)
        return;
    if (kill_it)
        kill(w->pid, SIGKILL);
    else if (write(w->to_fd, "quit\n", 5) < 0)
        kill(w->pid, SIGKILL);
    close(w->to_fd);
    close(w->from_fd);
    waitpid(w->pid, &status, 0);
    w->pid = -1;
    w->waiting = P_NONE;
}

static int worker_send(worker *w, const char *line, double timeout_ms)
{
    size_t n = strlen(line), done = 0;

    while (done < n) {
        ssize_t k = write(w->to_fd, line + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return 0;
        done += (size_t)k;
    }
    w->deadline = ft__now_ms() + timeout_ms;
    return 1;
}

/* Takes one complete line out of the worker's buffer, if there is one. */
static int worker_line(worker *w, char *out, size_t cap)
{
    char *nl = memchr(w->buf, '\n', w->len);
    size_t n;

    if (nl == NULL)
        return 0;
    n = (size_t)(nl - w->buf);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, w->buf, n);
    out[n] = '\0';
    w->len -= (size_t)(nl - w->buf) + 1;
    memmove(w->buf, nl + 1, w->len);
    return 1;
}

static long long ready_int(const char *line, const char *name)
{
    char key[40];
    const char *p;
    snprintf(key, sizeof key, " %s=", name);
    p = strstr(line, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* Fills the target and the fingerprint from a worker's ready line. */
static ft_status parse_ready(const char *line, ft_arch *arch, ft_db_device *dev, ft_err *err)
{
    const char *name = strstr(line, " name=");
    int major = 0, minor = 0;

    if (strncmp(line, "ready ", 6) != 0 || name == NULL)
        return ft__fail(err, FT_ERR_CUDA, "the worker did not start: %s", line);
    memset(arch, 0, sizeof *arch);
    memset(dev, 0, sizeof *dev);
    arch->cc = (int)ready_int(line, "cc");
    arch->sms = (int)ready_int(line, "sms");
    arch->smem_per_block = ready_int(line, "smem_block");
    arch->smem_per_sm = ready_int(line, "smem_sm");
    arch->regs_per_sm = (int)ready_int(line, "regs_sm");
    arch->regs_per_block = (int)ready_int(line, "regs_block");
    arch->threads_per_block = (int)ready_int(line, "threads_block");
    arch->threads_per_sm = (int)ready_int(line, "threads_sm");
    arch->regs_per_thread = 255;
    arch->from_device = 1;
    snprintf(arch->device_name, sizeof arch->device_name, "%s", name + 6);
    snprintf(arch->name, sizeof arch->name, "sm_%d", arch->cc);
    snprintf(dev->name, sizeof dev->name, "%s", name + 6);
    dev->cc = arch->cc;
    dev->sms = arch->sms;
    dev->smem_per_block = arch->smem_per_block;
    dev->smem_per_sm = arch->smem_per_sm;
    dev->l2_bytes = ready_int(line, "l2");
    dev->driver_version = (int)ready_int(line, "driver");
    if (ft__nvrtc_version(&major, &minor, err) != FT_OK)
        return FT_ERR_COMPILE;
    snprintf(dev->nvrtc_version, sizeof dev->nvrtc_version, "%d.%d", major, minor);
    return arch->cc > 0 ? FT_OK : ft__fail(err, FT_ERR_CUDA, "malformed ready line from the worker: %s", line);
}

/* Starts a worker and waits for its ready line. */
static ft_status worker_boot(tuner *tu, worker *w, ft_err *err)
{
    char line[1024];
    ft_status rc = worker_start(tu, w, err);

    while (rc == FT_OK) {
        struct pollfd pfd = {w->from_fd, POLLIN, 0};
        double left = w->deadline - ft__now_ms();
        ssize_t k;
        if (worker_line(w, line, sizeof line)) {
            if (strncmp(line, "ready ", 6) != 0) {
                rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: %s", w->device,
                              strncmp(line, "error ", 6) == 0 ? line + 6 : line);
                break;
            }
            snprintf(w->ready, sizeof w->ready, "%s", line);
            w->waiting = P_NONE;
            return FT_OK;
        }
        if (left <= 0) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker did not start within 120 s", w->device);
            break;
        }
        if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
            rc = ft__fail(err, FT_ERR_IO, "poll: %s", strerror(errno));
            break;
        }
        k = read(w->from_fd, w->buf + w->len, sizeof w->buf - w->len - 1);
        if (k == 0) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker exited before it was ready", w->device);
            break;
        }
        if (k > 0)
            w->len += (size_t)k;
    }
    worker_stop(w, 1);
    return rc;
}

/* ---- recording ---------------------------------------------------------------------------- */

static void fill_result(tuner *tu, const task *t, const kernel_ref *kr, ft_result_status st, const char *reason,
                        ft_db_result *r)
{
    memset(r, 0, sizeof *r);
    r->device_id = tu->device_id;
    r->kernel_id = kr->kernel_id;
    r->bucket = t->bucket;
    r->batch = t->shape.batch;
    r->heads_q = t->shape.heads_q;
    r->heads_kv = t->shape.heads_kv;
    r->seqlen_q = t->shape.seqlen_q;
    r->seqlen_k = t->shape.seqlen_k;
    r->status = st;
    snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
    r->median_ms = r->iqr_ms = r->tflops = r->max_error = NAN;
}

static ft_status record(tuner *tu, const ft_db_result *r, ft_err *err)
{
    tu->sum->by_status[r->status]++;
    return ft__db_record(tu->db, r, err);
}

static double field_double(const char *line, const char *name)
{
    char key[40];
    const char *p;
    snprintf(key, sizeof key, " %s=", name);
    p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

static ft_result_status status_of(const char *line)
{
    ft_result_status s = FT_RESULT_LAUNCH_FAILURE;
    char word[32] = "";
    const char *p = strstr(line, "status=");
    if (p != NULL)
        sscanf(p + 7, "%31[a-z_]", word);
    if (!ft__result_status_parse(word, &s))
        s = FT_RESULT_LAUNCH_FAILURE;
    return s;
}

/* A measurement reply for job j of task t. */
static ft_status on_result(tuner *tu, task *t, int j, const char *line, ft_err *err)
{
    const kernel_ref *kr = &tu->kernels[t->jobs[j]];
    const char *detail = strstr(line, " detail=");
    ft_result_status st = status_of(line);
    ft_db_result r;

    fill_result(tu, t, kr, st, detail ? detail + 8 : "", &r);
    if (st == FT_RESULT_OK) {
        r.median_ms = field_double(line, "median");
        r.iqr_ms = field_double(line, "q3") - field_double(line, "q1");
        r.tflops = ft__problem_flops(&t->shape) / (r.median_ms * 1e-3) / 1e12;
        r.repetitions = (int)field_double(line, "reps");
    }
    if (st == FT_RESULT_OK || st == FT_RESULT_WRONG_RESULT)
        r.max_error = field_double(line, "l2");
    tu->sum->verify_ms += field_double(line, "verify_ms");
    tu->sum->time_ms += field_double(line, "time_ms");
    tu->sum->measured++;
    t->dirty = 1;
    return record(tu, &r, err);
}

/* ---- the leaders' race -------------------------------------------------------------------- */

typedef struct collect {
    tuner *tu;
    task *t;
    ft_db_row rows[64];
    int n;
} collect;

static int collect_row(void *ud, const ft_db_row *row)
{
    collect *c = ud;
    const ft_db_bucket *b = &c->t->bucket;
    const ft_db_result *r = &row->result;
    int i;

    if (r->device_id != c->tu->device_id || r->bucket.seqlen_bucket != b->seqlen_bucket ||
        r->bucket.bh_bucket != b->bh_bucket || r->status != FT_RESULT_OK || row->stale || isnan(r->median_ms))
        return 0;
    /* keep the 64 fastest, in order */
    if (c->n == 64 && c->rows[63].result.median_ms <= r->median_ms)
        return 0;
    i = c->n < 64 ? c->n : 63;
    for (; i > 0 && c->rows[i - 1].result.median_ms > r->median_ms; i--)
        c->rows[i] = c->rows[i - 1];
    c->rows[i] = *row;
    if (c->n < 64)
        c->n++;
    return 0;
}

/* Leaders: the ok results within the noise of the fastest (2 %, or twice its spread). */
static ft_status find_leaders(tuner *tu, task *t, ft_err *err)
{
    collect *c = calloc(1, sizeof *c); /* 64 rows: too large for the stack */
    ft_db_filter f;
    double best, margin;
    ft_status rc;
    int i;

    if (c == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    c->tu = tu;
    c->t = t;
    ft__db_filter_init(&f);
    f.dtype = t->bucket.dtype;
    f.head_dim = t->bucket.head_dim;
    f.causal = t->bucket.causal;
    f.device_name = tu->dev.name;
    rc = ft__db_query(tu->db, &f, collect_row, c, err);
    t->nleaders = 0;
    if (rc != FT_OK || c->n < 2)
        goto out;
    best = c->rows[0].result.median_ms;
    margin = fmax(0.02 * best, 2 * (isnan(c->rows[0].result.iqr_ms) ? 0 : c->rows[0].result.iqr_ms));
    for (i = 0; i < c->n && i < MAX_LEADERS && c->rows[i].result.median_ms <= best + margin; i++)
        t->leaders[t->nleaders++] = c->rows[i];
    if (t->nleaders < 2)
        t->nleaders = 0;
out:
    free(c);
    return rc;
}

static int kernel_of(const tuner *tu, long long kernel_id)
{
    int i;
    for (i = 0; i < tu->nkernels; i++)
        if (tu->kernels[i].kernel_id == kernel_id)
            return i;
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The race is over: each leader's time becomes the median of its rounds. */
static ft_status finish_race(tuner *tu, task *t, ft_err *err)
{
    int i;

    for (i = 0; i < t->nleaders; i++) {
        double ms[RACE_ROUNDS];
        ft_db_result r = t->leaders[i].result;
        memcpy(ms, t->race_ms[i], sizeof ms);
        qsort(ms, RACE_ROUNDS, sizeof ms[0], cmp_double);
        if (isnan(ms[RACE_ROUNDS / 2]) || ms[RACE_ROUNDS / 2] <= 0)
            continue;
        r.median_ms = ms[RACE_ROUNDS / 2];
        r.tflops = ft__problem_flops(&t->shape) / (r.median_ms * 1e-3) / 1e12;
        {
            ft_status rc = ft__db_record(tu->db, &r, err);
            if (rc != FT_OK)
                return rc;
        }
    }
    tu->sum->races++;
    return FT_OK;
}

/* A plan item's kernel row; source and cubin are left NULL. */
static void kernel_row(const ft_plan *plan, const ft_plan_item *it, const char *template_hash,
                       ft_db_kernel *dk)
{
    memset(dk, 0, sizeof *dk);
    snprintf(dk->family, sizeof dk->family, "%s", plan->family->name);
    snprintf(dk->variant, sizeof dk->variant, "%s", it->variant_str);
    snprintf(dk->arch, sizeof dk->arch, "%s", plan->arch.name); /* the family's target: "sm_90a" */
    snprintf(dk->template_hash, sizeof dk->template_hash, "%s", template_hash);
    snprintf(dk->source_hash, sizeof dk->source_hash, "%s", it->source_hash);
    snprintf(dk->entry, sizeof dk->entry, "%s", it->source.entry);
    dk->registers = it->report.registers;
    dk->spill_stores = it->report.spill_stores;
    dk->spill_loads = it->report.spill_loads;
    dk->smem_static = it->report.smem_static;
    dk->smem_dynamic = it->smem_dynamic;
    dk->threads = it->threads;
    dk->compile_ms = it->compile_ms;
}

/* Whether task i is the first of its bucket (specs of two families can share a bucket). */
static int first_of_bucket(const tuner *tu, int i)
{
    int j;

    for (j = 0; j < i; j++)
        if (ft__db_bucket_equal(&tu->tasks[j].bucket, &tu->tasks[i].bucket))
            return 0;
    return 1;
}

/* Stores the winner's cubin and source with its kernel row, for dispatch and export. */
static ft_status store_winner(tuner *tu, task *t, ft_err *err)
{
    ft_db_row row;
    int found = 0, k;
    ft_status rc = ft__db_winner(tu->db, tu->device_id, &t->bucket, &row, NULL, NULL, &found, err);
    const kernel_ref *kr;
    ft_plan_item *it;
    ft_compiled c;
    ft_kernel_source src;
    ft_db_kernel dk;

    if (rc != FT_OK || !found)
        return rc;
    k = kernel_of(tu, row.result.kernel_id);
    if (k < 0)
        return FT_OK; /* a winner from another spec or run: its row already has what it needs */
    kr = &tu->kernels[k];
    it = &tu->plans[kr->spec]->items[kr->item];
    if (!ft__cache_get(tu->cache, it->key, &c))
        return FT_OK;
    rc = ft__emit(tu->specs[kr->spec], tu->plans[kr->spec]->family, &it->variant, &tu->arch, &src, err);
    if (rc == FT_OK) {
        kernel_row(tu->plans[kr->spec], it, src.template_hash, &dk);
        dk.source = src.text;
        dk.cubin = c.cubin;
        dk.cubin_size = c.cubin_size;
        {
            long long id;
            rc = ft__db_kernel_id(tu->db, &dk, &id, err);
        }
    }
    ft__kernel_source_free(&src);
    ft__compiled_free(&c);
    return rc;
}

/* ---- the event loop ----------------------------------------------------------------------- */

static void progress(tuner *tu, const char *what)
{
    if (tu->progress != NULL)
        tu->progress(tu->ud, tu->done, tu->planned, what);
}

/* The measure command for a kernel; returns its plan item. */
static const ft_plan_item *measure_line(const tuner *tu, const kernel_ref *kr, int verify, int budget, char *out,
                                        size_t cap)
{
    const ft_plan_item *it = &tu->plans[kr->spec]->items[kr->item];
    const ft_spec *spec = tu->specs[kr->spec];
    /* Kernels reading Q, K and V through tensor maps need the K/V box rows (0: no maps) and
     * the balance knob (the grid); the head dim and causality come with the shape. */
    const int tma = tu->plans[kr->spec]->family->uses_tma;
    char hex[65];

    ft__sha256_hex(it->key, hex);
    snprintf(out, cap,
             "measure key=%s entry=%s threads=%d rows=%lld smem=%lld verify=%d budget=%d tma_kv=%lld balance=%lld\n",
             hex, it->source.entry, it->threads, ft__variant_int(spec, &it->variant, "bm", 64), it->smem_dynamic,
             verify, budget, tma ? ft__variant_int(spec, &it->variant, "bn", 64) : 0,
             ft__variant_int(spec, &it->variant, "balance", 0));
    return it;
}

/* Sends the worker its next command; returns 0 when it has nothing left to do. */
static int dispatch(tuner *tu, worker *w, ft_err *err, ft_status *rc)
{
    char line[1024];

    while (w->cur < w->ntasks) {
        task *t = &tu->tasks[w->tasks[w->cur]];
        if (t->failed) {
            w->cur++;
            continue;
        }
        if (!t->shape_ready) {
            snprintf(line, sizeof line, "shape b=%d hq=%d hkv=%d sq=%d sk=%d d=%d causal=%d bf16=%d seed=%d\n",
                     t->shape.batch, t->shape.heads_q, t->shape.heads_kv, t->shape.seqlen_q, t->shape.seqlen_k,
                     t->shape.head_dim, t->shape.causal, t->shape.bf16, 17 + w->tasks[w->cur]);
            w->waiting = P_SHAPE;
            return worker_send(w, line, 600e3) ? 1 : -1;
        }
        if (t->next < t->njobs) {
            const ft_plan_item *it = measure_line(tu, &tu->kernels[t->jobs[t->next]], 1, tu->o->budget_ms, line,
                                                  sizeof line);
            w->waiting = P_MEASURE;
            w->job = t->next++;
            progress(tu, it->variant_str);
            return worker_send(w, line, tu->o->timeout_s * 1e3) ? 1 : -1;
        }
        if (t->dirty && !t->race_started) {
            t->race_started = 1;
            *rc = find_leaders(tu, t, err);
            if (*rc != FT_OK)
                return 0;
        }
        if (t->race_started && t->race_next < t->nleaders * RACE_ROUNDS) {
            int leader = t->race_next % t->nleaders;
            int k = kernel_of(tu, t->leaders[leader].result.kernel_id);
            if (k >= 0) {
                measure_line(tu, &tu->kernels[k], 0, tu->o->budget_ms / 2 + 1, line, sizeof line);
                w->waiting = P_RACE;
                w->job = t->race_next++;
                return worker_send(w, line, tu->o->timeout_s * 1e3) ? 1 : -1;
            }
            t->race_ms[leader][t->race_next / t->nleaders] = NAN;
            t->race_next++;
            continue;
        }
        if (t->race_started && t->nleaders > 0) {
            *rc = finish_race(tu, t, err);
            if (*rc != FT_OK)
                return 0;
        }
        if (t->dirty) {
            *rc = store_winner(tu, t, err);
            if (*rc != FT_OK)
                return 0;
        }
        w->cur++;
    }
    return 0;
}

/* The worker died or hung with a command in flight: record it, and start a new one. */
static ft_status replace_worker(tuner *tu, worker *w, ft_result_status st, const char *why, ft_err *err)
{
    ft_status rc = FT_OK;
    task *t = w->cur < w->ntasks ? &tu->tasks[w->tasks[w->cur]] : NULL;

    if (t != NULL && w->waiting == P_MEASURE) {
        ft_db_result r;
        fill_result(tu, t, &tu->kernels[t->jobs[w->job]], st, why, &r);
        tu->sum->measured++;
        tu->done++;
        t->dirty = 1;
        rc = record(tu, &r, err);
    } else if (t != NULL && w->waiting == P_SHAPE) {
        fprintf(stderr, "flashtune tune: bucket %s d=%d causal=%d seqlen %d: %s; skipped\n", t->bucket.dtype,
                t->bucket.head_dim, t->bucket.causal, t->shape.seqlen_k, why);
        t->failed = 1;
    } else if (t != NULL && w->waiting == P_RACE) {
        t->race_ms[w->job % t->nleaders][w->job / t->nleaders] = NAN;
    }
    worker_stop(w, 1);
    if (rc != FT_OK)
        return rc;
    tu->sum->worker_restarts++;
    if (t != NULL)
        t->shape_ready = 0;
    return worker_boot(tu, w, err);
}

static ft_status on_line(tuner *tu, worker *w, const char *line, ft_err *err)
{
    task *t = &tu->tasks[w->tasks[w->cur]];
    pending was = w->waiting;

    w->waiting = P_NONE;
    switch (was) {
    case P_SHAPE:
        if (strcmp(line, "ok") == 0) {
            t->shape_ready = 1;
        } else {
            fprintf(stderr, "flashtune tune: bucket %s d=%d causal=%d seqlen %d: %s; skipped\n", t->bucket.dtype,
                    t->bucket.head_dim, t->bucket.causal, t->shape.seqlen_k, line);
            t->failed = 1;
            tu->done += t->njobs - t->next;
        }
        return FT_OK;
    case P_MEASURE: {
        ft_status rc = on_result(tu, t, w->job, line, err);
        tu->done++;
        if (rc == FT_OK && status_of(line) == FT_RESULT_FAULT) {
            /* the worker exits after a fault; start another */
            worker_stop(w, 1);
            tu->sum->worker_restarts++;
            t->shape_ready = 0;
            rc = worker_boot(tu, w, err);
        }
        return rc;
    }
    case P_RACE:
        t->race_ms[w->job % t->nleaders][w->job / t->nleaders] =
            status_of(line) == FT_RESULT_OK ? field_double(line, "median") : NAN;
        return FT_OK;
    default:
        return ft__fail(err, FT_ERR_INTERNAL, "unexpected line from the worker: %s", line);
    }
}

static ft_status run_workers(tuner *tu, ft_err *err)
{
    ft_status rc = FT_OK;
    struct pollfd pfd[64];
    int i;

    for (;;) {
        int active = 0, n = 0, map[64];
        double now, next_deadline = 1e300;

        if (tu->o->stop != NULL && *tu->o->stop)
            return ft__fail(err, FT_ERR_INTERRUPTED, "interrupted: %lld measurements were recorded",
                            tu->sum->measured);
        for (i = 0; i < tu->nworkers; i++) {
            worker *w = &tu->workers[i];
            if (w->waiting == P_NONE) {
                int d = dispatch(tu, w, err, &rc);
                if (rc != FT_OK)
                    return rc;
                if (d < 0) {
                    rc = replace_worker(tu, w, FT_RESULT_FAULT, "the worker stopped reading its commands", err);
                    if (rc != FT_OK)
                        return rc;
                    continue;
                }
            }
            if (w->waiting != P_NONE) {
                active++;
                pfd[n].fd = w->from_fd;
                pfd[n].events = POLLIN;
                pfd[n].revents = 0;
                map[n++] = i;
                if (w->deadline < next_deadline)
                    next_deadline = w->deadline;
            }
        }
        if (active == 0)
            return FT_OK;
        now = ft__now_ms();
        if (poll(pfd, (nfds_t)n, next_deadline - now > 1000 ? 1000 : (int)fmax(0, next_deadline - now)) < 0 &&
            errno != EINTR)
            return ft__fail(err, FT_ERR_IO, "poll: %s", strerror(errno));
        for (i = 0; i < n; i++) {
            worker *w = &tu->workers[map[i]];
            char line[16384];
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t k = read(w->from_fd, w->buf + w->len, sizeof w->buf - w->len - 1);
                if (k <= 0) {
                    int status = 0;
                    char why[128];
                    waitpid(w->pid, &status, 0);
                    w->pid = -1;
                    if (WIFSIGNALED(status))
                        snprintf(why, sizeof why, "the worker died (signal %d)", WTERMSIG(status));
                    else
                        snprintf(why, sizeof why, "the worker exited with status %d", WEXITSTATUS(status));
                    close(w->to_fd);
                    close(w->from_fd);
                    w->pid = 0;
                    rc = replace_worker(tu, w, FT_RESULT_FAULT, why, err);
                    if (rc != FT_OK)
                        return rc;
                    continue;
                }
                w->len += (size_t)k;
                while (w->waiting != P_NONE && worker_line(w, line, sizeof line)) {
                    rc = on_line(tu, w, line, err);
                    if (rc != FT_OK)
                        return rc;
                }
            } else if (ft__now_ms() > w->deadline) {
                rc = replace_worker(tu, w, FT_RESULT_TIMEOUT, "no answer within the timeout (hung?)", err);
                if (rc != FT_OK)
                    return rc;
            }
        }
    }
}

/* ---- setup -------------------------------------------------------------------------------- */

static ft_status start_workers(tuner *tu, ft_err *err)
{
    ft_status rc;
    long long count;
    int i;

    tu->workers = calloc(64, sizeof *tu->workers);
    if (tu->workers == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    tu->workers[0].device = tu->o->device < 0 ? 0 : tu->o->device;
    tu->nworkers = 1;
    rc = worker_boot(tu, &tu->workers[0], err);
    if (rc != FT_OK)
        return rc;
    rc = parse_ready(tu->workers[0].ready, &tu->arch, &tu->dev, err);
    if (rc != FT_OK)
        return rc;
    count = ready_int(tu->workers[0].ready, "count");
    if (tu->o->device >= 0)
        return FT_OK;
    for (i = 1; i < count && i < 64; i++) {
        ft_arch a;
        ft_db_device d;
        tu->workers[i].device = i;
        tu->nworkers++;
        rc = worker_boot(tu, &tu->workers[i], err);
        if (rc == FT_OK)
            rc = parse_ready(tu->workers[i].ready, &a, &d, err);
        if (rc != FT_OK)
            return rc;
        if (!ft__db_device_same_model(&d, &tu->dev) || !ft__db_device_same_driver(&d, &tu->dev))
            return ft__fail(err, FT_ERR_UNSUPPORTED,
                            "--device all needs identical GPUs, but GPU 0 is %s and GPU %d is %s (driver %d vs %d); "
                            "tune each with --device N",
                            tu->dev.name, i, d.name, tu->dev.driver_version, d.driver_version);
    }
    return FT_OK;
}

static const char *param_value(const ft_spec *spec, const ft_variant *v, const char *name, char *buf, size_t cap)
{
    int i = ft__spec_param_index(spec, name);
    if (i < 0)
        return NULL;
    if (spec->params[i].kind == FT_PARAM_INT)
        snprintf(buf, cap, "%lld", spec->params[i].ints[v->idx[i]]);
    else
        snprintf(buf, cap, "%s", spec->params[i].strings[v->idx[i]]);
    return buf;
}

/* Compiles every spec's plan and registers the kernels in the database. */
static ft_status compile_all(tuner *tu, ft_variant *filter, unsigned *masks, ft_err *err)
{
    ft_status rc = FT_OK;
    int s, i;
    double t0 = ft__now_ms();

    tu->plans = calloc((size_t)tu->nspecs, sizeof *tu->plans);
    if (tu->plans == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (s = 0; s < tu->nspecs && rc == FT_OK; s++) {
        ft_plan *plan;
        char th[65];
        rc = ft__plan_build(tu->specs[s], &tu->arch, &filter[s], masks[s], &tu->plans[s], err);
        if (rc != FT_OK)
            break;
        plan = tu->plans[s];
        ft__family_hash(plan->family, th);
        rc = ft__db_set_current(tu->db, tu->dev.driver_version, tu->dev.nvrtc_version, plan->family->name, th, err);
        if (rc != FT_OK)
            break;
        if (tu->progress != NULL)
            tu->progress(tu->ud, 0, plan->count[FT_PLAN_PENDING], "compiling");
        rc = ft__plan_compile(plan, tu->cache, tu->o->jobs, NULL, NULL, tu->o->stop, err);
        tu->sum->pruned += plan->count[FT_PLAN_PRUNED];
        tu->sum->variants += plan->nitems - plan->count[FT_PLAN_PRUNED];
    }
    tu->sum->compile_ms = ft__now_ms() - t0;
    if (rc != FT_OK)
        return rc;
    for (s = 0; s < tu->nspecs; s++)
        tu->nkernels += tu->plans[s]->nitems;
    tu->kernels = calloc((size_t)tu->nkernels + 1, sizeof *tu->kernels);
    if (tu->kernels == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    tu->nkernels = 0;
    for (s = 0; s < tu->nspecs && rc == FT_OK; s++) {
        ft_plan *plan = tu->plans[s];
        char th[65];
        ft__family_hash(plan->family, th);
        for (i = 0; i < plan->nitems && rc == FT_OK; i++) {
            ft_plan_item *it = &plan->items[i];
            kernel_ref *kr = &tu->kernels[tu->nkernels];
            ft_db_kernel dk;
            if (it->status == FT_PLAN_PRUNED)
                continue;
            kernel_row(plan, it, th, &dk);
            kr->spec = s;
            kr->item = i;
            rc = ft__db_kernel_id(tu->db, &dk, &kr->kernel_id, err);
            tu->nkernels++;
        }
    }
    return rc;
}

/* A bucket to tune: a shape with its dtype and causality. */
typedef struct target {
    ft_workload wl;
    char dtype[8];
    int causal;
} target;

typedef struct target_list {
    target *v;
    int n, cap;
} target_list;

static ft_status target_add(target_list *l, const ft_workload *wl, const char *dtype, int causal, ft_err *err)
{
    if (l->n == l->cap) {
        target *nv = realloc(l->v, (size_t)(l->cap = l->cap ? 2 * l->cap : 64) * sizeof *nv);
        if (nv == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        l->v = nv;
    }
    l->v[l->n].wl = *wl;
    snprintf(l->v[l->n].dtype, sizeof l->v[l->n].dtype, "%s", dtype);
    l->v[l->n].causal = causal;
    l->n++;
    return FT_OK;
}

/* The spec's workloads crossed with its dtypes and causal values. */
static ft_status spec_targets(const ft_spec *spec, target_list *l, ft_err *err)
{
    int di = ft__spec_param_index(spec, "dtype"), ci = ft__spec_param_index(spec, "causal");
    int ndt = di >= 0 ? spec->params[di].nvalues : 1, nc = ci >= 0 ? spec->params[ci].nvalues : 1;
    ft_status rc = FT_OK;
    int w, dt, c;

    for (w = 0; w < spec->nworkloads && rc == FT_OK; w++)
        for (dt = 0; dt < ndt && rc == FT_OK; dt++)
            for (c = 0; c < nc && rc == FT_OK; c++)
                rc = target_add(l, &spec->workloads[w], di >= 0 ? spec->params[di].strings[dt] : "f16",
                                ci >= 0 ? (int)spec->params[ci].ints[c] : 0, err);
    return rc;
}

typedef struct miss_collect {
    const ft_db_device *dev;
    target_list *l;
    ft_status rc;
    ft_err *err;
} miss_collect;

/* A miss of this GPU model (any driver or NVRTC version), once per bucket: the shape of the
 * first call that missed. */
static int collect_miss(void *ud, const ft_db_miss *m)
{
    miss_collect *mc = ud;
    ft_workload wl;
    int i;

    if (!ft__db_device_same_model(&m->device, mc->dev))
        return 0;
    for (i = 0; i < mc->l->n; i++) {
        ft_db_bucket b;
        const target *t = &mc->l->v[i];
        ft__db_bucket(t->dtype, t->wl.d, t->causal, t->wl.b, t->wl.hq, t->wl.sq, t->wl.sk, &b);
        if (ft__db_bucket_equal(&b, &m->bucket))
            return 0;
    }
    wl.b = m->batch, wl.hq = m->heads_q, wl.hkv = m->heads_kv;
    wl.sq = m->seqlen_q, wl.sk = m->seqlen_k, wl.d = m->bucket.head_dim;
    mc->rc = target_add(mc->l, &wl, m->bucket.dtype, m->bucket.causal, mc->err);
    return mc->rc != FT_OK;
}

/* One task for a target and a spec, with the spec's matching compiled variants; variants that
 * did not compile or fit are recorded as such for the bucket right away. */
static ft_status add_task(tuner *tu, int s, const target *tg, ft_err *err)
{
    const ft_workload *wl = &tg->wl;
    const char *dtype = tg->dtype;
    const int causal = tg->causal;
    ft_status rc = FT_OK;
    task *t;
    int k, matched = 0;

    if (tu->ntasks == tu->tasks_cap) {
        task *nt = realloc(tu->tasks, (size_t)(tu->tasks_cap = tu->tasks_cap ? 2 * tu->tasks_cap : 64) * sizeof *nt);
        if (nt == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        tu->tasks = nt;
    }
    t = &tu->tasks[tu->ntasks];
    memset(t, 0, sizeof *t);
    t->shape.batch = wl->b, t->shape.heads_q = wl->hq, t->shape.heads_kv = wl->hkv;
    t->shape.seqlen_q = wl->sq, t->shape.seqlen_k = wl->sk, t->shape.head_dim = wl->d;
    t->shape.causal = causal;
    t->shape.bf16 = strcmp(dtype, "bf16") == 0;
    ft__db_bucket(dtype, wl->d, causal, wl->b, wl->hq, wl->sq, wl->sk, &t->bucket);
    t->jobs = calloc((size_t)tu->nkernels + 1, sizeof *t->jobs);
    if (t->jobs == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (k = 0; k < tu->nkernels && rc == FT_OK; k++) {
        const kernel_ref *kr = &tu->kernels[k];
        const ft_plan_item *it = &tu->plans[kr->spec]->items[kr->item];
        const ft_spec *ks = tu->specs[kr->spec];
        char b1[32], b2[32], b3[32];
        const char *vd = param_value(ks, &it->variant, "d", b1, sizeof b1);
        const char *vdt = param_value(ks, &it->variant, "dtype", b2, sizeof b2);
        const char *vc = param_value(ks, &it->variant, "causal", b3, sizeof b3);
        int has = 0;
        if (kr->spec != s || (vd && atoi(vd) != wl->d) || (vdt && strcmp(vdt, dtype) != 0) ||
            (vc && atoi(vc) != causal))
            continue;
        matched = 1;
        if (!tu->o->remeasure)
            rc = ft__db_has_result(tu->db, tu->device_id, kr->kernel_id, &t->bucket, &has, err);
        if (rc != FT_OK)
            break;
        if (has) {
            tu->sum->resumed++;
            continue;
        }
        if (it->status == FT_PLAN_COMPILED) {
            t->jobs[t->njobs++] = k;
        } else {
            ft_db_result r;
            fill_result(tu, t, kr,
                        it->status == FT_PLAN_COMPILE_ERROR ? FT_RESULT_COMPILE_ERROR : FT_RESULT_OVER_LIMITS,
                        it->reason, &r);
            rc = record(tu, &r, err);
            tu->sum->measured++;
        }
    }
    if (rc != FT_OK || (t->njobs == 0 && !matched)) {
        free(t->jobs); /* on success: no variant computes this bucket */
        return rc;
    }
    tu->planned += t->njobs;
    tu->ntasks++;
    return FT_OK;
}

/* The buckets the runtime library recorded as misses on this GPU model. */
static ft_status miss_targets(tuner *tu, target_list *l, ft_err *err)
{
    miss_collect mc = {&tu->dev, l, FT_OK, err};
    ft_status rc = ft__db_misses(tu->db, NULL, -1, collect_miss, &mc, err);

    if (rc == FT_OK)
        rc = mc.rc;
    tu->sum->misses = l->n;
    return rc;
}

/* One task per bucket and spec: the spec's workloads crossed with its dtypes and causal
 * values, or the given targets (misses) when there are any. */
static ft_status make_tasks(tuner *tu, const target_list *given, ft_err *err)
{
    ft_status rc = FT_OK;
    target_list own;
    const target_list *l = given->n > 0 ? given : &own;
    int s, i;

    memset(&own, 0, sizeof own);
    for (s = 0; s < tu->nspecs && rc == FT_OK; s++) {
        if (l == &own) {
            own.n = 0;
            rc = spec_targets(tu->specs[s], &own, err);
        }
        for (i = 0; i < l->n && rc == FT_OK; i++)
            rc = add_task(tu, s, &l->v[i], err);
    }
    free(own.v);
    for (i = 0; i < tu->ntasks; i++)
        tu->sum->buckets += first_of_bucket(tu, i);
    return rc;
}

/* The worker program (worker_cmd, else this executable) and the compile cache it shares. */
static ft_status tuner_open(tuner *tu, const char *worker_cmd, const char *cache_dir, ft_err *err)
{
    ft_status rc;

    if (worker_cmd != NULL) {
        snprintf(tu->worker_path, sizeof tu->worker_path, "%s", worker_cmd);
    } else {
        ssize_t n = readlink("/proc/self/exe", tu->worker_path, sizeof tu->worker_path - 1);
        if (n <= 0)
            return ft__fail(err, FT_ERR_IO, "cannot find this executable: %s", strerror(errno));
        tu->worker_path[n] = '\0';
    }
    rc = ft__cache_open(cache_dir, &tu->cache, err);
    if (rc == FT_OK)
        snprintf(tu->cache_dir, sizeof tu->cache_dir, "%s", ft__cache_dir(tu->cache));
    return rc;
}

ft_status ft__tune(ft_spec *const *specs, int nspecs, const ft_tune_opts *o, ft_tune_progress_fn prog, void *ud,
                   ft_tune_summary *summary, ft_err *err)
{
    ft_status rc;
    tuner tu;
    ft_variant filter[16];
    unsigned masks[16];
    ft_spec *kept[16];
    int usable[16], nusable = nspecs;
    target_list misses;
    double t0 = ft__now_ms();
    int i;

    memset(&tu, 0, sizeof tu);
    memset(&misses, 0, sizeof misses);
    memset(summary, 0, sizeof *summary);
    memset(masks, 0, sizeof masks);
    tu.o = o;
    tu.specs = specs;
    tu.nspecs = nspecs;
    tu.sum = summary;
    tu.progress = prog;
    tu.ud = ud;
    if (nspecs < 1 || nspecs > 16)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "tune takes 1 to 16 specs");
    for (i = 0; i < nspecs; i++) {
        usable[i] = 1;
        if (o->only != NULL) {
            ft_err ferr;
            rc = ft__variant_filter_parse(specs[i], o->only, &filter[i], &masks[i], &ferr);
            if (rc != FT_OK && !o->skip_unsupported) {
                *err = ferr;
                return rc;
            }
            /* In the built-in set, a filter naming another family's parameter leaves this
             * spec out; if it leaves every spec out, the first reason is the error. */
            if (rc != FT_OK && nusable-- == nspecs)
                *err = ferr;
            usable[i] = rc == FT_OK;
        }
    }
    if (nusable == 0)
        return err->code;
    rc = tuner_open(&tu, o->worker_cmd, o->cache_dir, err);
    if (rc != FT_OK)
        goto out;
    rc = ft__db_open(o->db_path, 0, &tu.db, err);
    if (rc != FT_OK)
        goto out;
    snprintf(summary->db_path, sizeof summary->db_path, "%s", ft__db_path(tu.db));
    rc = start_workers(&tu, err);
    if (rc != FT_OK)
        goto out;
    snprintf(summary->device_name, sizeof summary->device_name, "%s", tu.dev.name);
    if (o->skip_unsupported) {
        int n = 0;
        for (i = 0; i < tu.nspecs; i++) {
            const ft_family *fam = ft__family_find(specs[i]->template_name);
            char why[256];
            if (!usable[i] || (fam != NULL && !ft__family_supports_arch(fam, &tu.arch, why, sizeof why)))
                continue;
            kept[n] = specs[i];
            filter[n] = filter[i];
            masks[n] = masks[i];
            n++;
        }
        tu.specs = kept;
        tu.nspecs = n;
        if (n == 0) {
            rc = ft__fail(err, FT_ERR_UNSUPPORTED, "no spec has kernels for %s (%s)", tu.dev.name, tu.arch.name);
            goto out;
        }
    }
    rc = ft__db_device_id(tu.db, &tu.dev, &tu.device_id, err);
    if (rc == FT_OK && o->misses) {
        rc = miss_targets(&tu, &misses, err);
        if (rc != FT_OK || misses.n == 0)
            goto out; /* no misses: nothing to compile or measure */
    }
    if (rc == FT_OK)
        rc = compile_all(&tu, filter, masks, err);
    if (rc == FT_OK)
        rc = make_tasks(&tu, &misses, err);
    if (rc != FT_OK)
        goto out;
    /* Share the buckets among the GPUs, largest first so the tail stays short. */
    for (i = 0; i < tu.nworkers; i++) {
        tu.workers[i].tasks = calloc((size_t)tu.ntasks + 1, sizeof(int));
        if (tu.workers[i].tasks == NULL) {
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
            goto out;
        }
    }
    for (i = 0; i < tu.ntasks; i++) {
        worker *w = &tu.workers[i % tu.nworkers];
        w->tasks[w->ntasks++] = i;
    }
    progress(&tu, "measuring");
    rc = run_workers(&tu, err);
out:
    for (i = 0; i < tu.nworkers; i++) {
        worker_stop(&tu.workers[i], rc != FT_OK);
        free(tu.workers[i].tasks);
    }
    free(tu.workers);
    free(misses.v);
    for (i = 0; i < tu.ntasks; i++) { /* the buckets that have a winner now */
        ft_db_row row;
        ft_err ignored;
        int found = 0;
        if (first_of_bucket(&tu, i) &&
            ft__db_winner(tu.db, tu.device_id, &tu.tasks[i].bucket, &row, NULL, NULL, &found, &ignored) == FT_OK)
            summary->winners += found;
    }
    for (i = 0; i < tu.ntasks; i++)
        free(tu.tasks[i].jobs);
    free(tu.tasks);
    free(tu.kernels);
    if (tu.plans != NULL)
        for (i = 0; i < tu.nspecs; i++) /* the specs kept for this GPU */
            ft__plan_free(tu.plans[i]);
    free(tu.plans);
    ft__db_close(tu.db);
    ft__cache_close(tu.cache);
    summary->wall_ms = ft__now_ms() - t0;
    return rc;
}

ft_status ft__tune_probe(const char *worker_cmd, const char *cache_dir, int device, ft_db_device *dev, ft_err *err)
{
    ft_status rc;
    tuner *tu = NULL;
    worker w;
    ft_arch arch;

    memset(&w, 0, sizeof w);
    w.device = device;
    tu = calloc(1, sizeof *tu);
    if (tu == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    rc = tuner_open(tu, worker_cmd, cache_dir, err);
    if (rc != FT_OK)
        goto out;
    rc = worker_boot(tu, &w, err);
    if (rc != FT_OK)
        goto out;
    rc = parse_ready(w.ready, &arch, dev, err);
    worker_stop(&w, 0);
out:
    ft__cache_close(tu->cache);
    free(tu);
    return rc;
}
