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
 * Nothing a worker sends is trusted: every command carries an id that its answer must repeat,
 * lines are bounded, every field of an answer is checked (ft__tune_parse_result), and a worker
 * that breaks the protocol is killed, reaped and started again, the measurement tried once more
 * and then recorded as a fault, never as a time. Every wait has a deadline, and the stop flag (a
 * signal) ends the tune from any of them, the workers killed and reaped.
 *
 * Per bucket: the shape is set up once (inputs, reference), every variant is measured, and when
 * the fastest variants lie within each other's noise they are re-measured interleaved, a few
 * rounds, and the median of the rounds decides.
 */
#include "tune.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/compile.h"
#include "ops/problem.h"
#include "runtime/verify.h"
#include "tuner/plan.h"

extern char **environ;

#define RACE_ROUNDS 3
#define MAX_LEADERS 4

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
    int ntasks;
    int cur;                   /* its current task */
    int count;                 /* from the ready line: the GPUs its driver sees */
    ft_arch arch;              /* ... the device's limits */
    ft_db_device dev;          /* ... and its fingerprint */
} worker;

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

static int stopped(const tuner *tu)
{
    return tu->o != NULL && tu->o->stop != NULL && *tu->o->stop;
}

static ft_status interrupted(const tuner *tu, ft_err *err)
{
    return ft__fail(err, FT_ERR_INTERRUPTED, "interrupted: %lld measurements were recorded",
                    tu->sum != NULL ? tu->sum->measured : 0);
}

/* Text from a worker as it may be shown: control characters and non-ASCII bytes as \xNN,
 * cut at cap (common/text.c, which has ft__printable, is not on this branch). */
static void printable(const char *in, char *out, size_t cap)
{
    size_t n = 0;

    for (; *in != '\0' && n + 5 < cap; in++) {
        unsigned char c = (unsigned char)*in;
        if (c < 0x20 || c >= 0x7f)
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
}

/* ---- shapes ------------------------------------------------------------------------------- */

ft_status ft__tune_check_shape(const ft_problem *p, ft_err *err)
{
    const unsigned long long limit = FT_TUNE_MAX_ELEMENTS;
    unsigned long long q, kv;
    ft_status rc = ft__problem_validate(p, err);

    if (rc != FT_OK)
        return rc;
    if (p->head_dim % 8 != 0 || p->head_dim > 1024)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "head dim %d is not supported (a multiple of 8 from 8 to 1024)", p->head_dim);
    if (p->seqlen_q > (1 << 30) || p->seqlen_k > (1 << 30))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "sequence lengths %d/%d: at most 2^30", p->seqlen_q,
                        p->seqlen_k);
    if ((long long)p->batch * p->heads_q > (1LL << 30))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "batch %d times %d heads: at most 2^30", p->batch,
                        p->heads_q);
    /* both products below 2^60: no overflow in 64 bits */
    q = (unsigned long long)p->batch * (unsigned long long)p->heads_q * (unsigned long long)p->seqlen_q;
    kv = (unsigned long long)p->batch * (unsigned long long)p->heads_kv * (unsigned long long)p->seqlen_k;
    if (q > limit / (unsigned long long)p->head_dim || kv > limit / (unsigned long long)p->head_dim)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "tensors of more than 2^40 elements");
    return FT_OK;
}

/* ---- the lines a worker sends --------------------------------------------------------------- */

/* A line split into its first word and key=value fields; the field named rest_key (detail=,
 * name=) takes the rest of the line, spaces and all. */
typedef struct fields {
    char word[16];
    int n;
    char key[MAX_FIELDS][16];
    char val[MAX_FIELDS][64];
    const char *rest; /* the rest_key field's text; NULL when absent */
} fields;

/* A line from a worker holds no control character. */
static ft_status check_text(const char *line, ft_err *err)
{
    const char *p;

    for (p = line; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            return ft__fail(err, FT_ERR_CORRUPT, "a control character (0x%02x)", (unsigned char)*p);
    return FT_OK;
}

static ft_status split_fields(const char *line, const char *rest_key, fields *f, ft_err *err)
{
    static const char lower[] = "abcdefghijklmnopqrstuvwxyz";
    static const char keychars[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
    const size_t rk = rest_key != NULL ? strlen(rest_key) : 0;
    const char *p;
    size_t n;

    memset(f, 0, sizeof *f);
    if (check_text(line, err) != FT_OK)
        return FT_ERR_CORRUPT;
    n = strspn(line, lower);
    if (n == 0 || n >= sizeof f->word || (line[n] != ' ' && line[n] != '\0'))
        return ft__fail(err, FT_ERR_CORRUPT, "the line does not start with a word");
    memcpy(f->word, line, n);
    p = line + n;
    while (*p == ' ') {
        const char *end, *eq;
        size_t kn, vn;
        int i;
        p++;
        if (rest_key != NULL && strncmp(p, rest_key, rk) == 0 && p[rk] == '=') {
            f->rest = p + rk + 1;
            return FT_OK;
        }
        end = p + strcspn(p, " ");
        eq = memchr(p, '=', (size_t)(end - p));
        if (eq == NULL)
            return ft__fail(err, FT_ERR_CORRUPT, "'%.*s' is not key=value", (int)(end - p > 40 ? 40 : end - p), p);
        kn = (size_t)(eq - p);
        vn = (size_t)(end - eq - 1);
        if (kn == 0 || kn >= sizeof f->key[0] || strspn(p, keychars) < kn)
            return ft__fail(err, FT_ERR_CORRUPT, "'%.*s' is not a key", (int)(kn > 40 ? 40 : kn), p);
        if (vn == 0 || vn >= sizeof f->val[0])
            return ft__fail(err, FT_ERR_CORRUPT, "the value of %.*s is empty or too long", (int)kn, p);
        for (i = 0; i < f->n; i++)
            if (strlen(f->key[i]) == kn && memcmp(f->key[i], p, kn) == 0)
                return ft__fail(err, FT_ERR_CORRUPT, "%.*s appears twice", (int)kn, p);
        if (f->n == MAX_FIELDS)
            return ft__fail(err, FT_ERR_CORRUPT, "more than %d fields", MAX_FIELDS);
        memcpy(f->key[f->n], p, kn);
        memcpy(f->val[f->n], eq + 1, vn);
        f->n++;
        p = end;
    }
    return FT_OK;
}

static const char *field_get(const fields *f, const char *key)
{
    int i;
    for (i = 0; i < f->n; i++)
        if (strcmp(f->key[i], key) == 0)
            return f->val[i];
    return NULL;
}

/* Every field is one of keys, and every one of keys is there. */
static ft_status check_keys(const fields *f, const char *const *keys, ft_err *err)
{
    int i, k;

    for (i = 0; i < f->n; i++) {
        for (k = 0; keys[k] != NULL && strcmp(keys[k], f->key[i]) != 0; k++)
            ;
        if (keys[k] == NULL)
            return ft__fail(err, FT_ERR_CORRUPT, "unknown field %s", f->key[i]);
    }
    for (k = 0; keys[k] != NULL; k++)
        if (field_get(f, keys[k]) == NULL)
            return ft__fail(err, FT_ERR_CORRUPT, "%s is missing", keys[k]);
    return FT_OK;
}

static ft_status field_double(const fields *f, const char *key, double *out, ft_err *err)
{
    const char *v = field_get(f, key);
    char *end;

    if (v == NULL)
        return ft__fail(err, FT_ERR_CORRUPT, "%s is missing", key);
    *out = strtod(v, &end);
    if (end == v || *end != '\0')
        return ft__fail(err, FT_ERR_CORRUPT, "%s=%s is not a number", key, v);
    return FT_OK;
}

static ft_status field_int(const fields *f, const char *key, long long lo, long long hi, long long *out, ft_err *err)
{
    const char *v = field_get(f, key);
    char *end;
    long long x;

    if (v == NULL)
        return ft__fail(err, FT_ERR_CORRUPT, "%s is missing", key);
    errno = 0;
    x = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0)
        return ft__fail(err, FT_ERR_CORRUPT, "%s=%s is not an integer", key, v);
    if (x < lo || x > hi)
        return ft__fail(err, FT_ERR_CORRUPT, "%s=%lld is out of range (%lld to %lld)", key, x, lo, hi);
    *out = x;
    return FT_OK;
}

/* The id field, which must come first and be the command's. */
static ft_status check_id(const fields *f, unsigned long long want, ft_err *err)
{
    const char *v = f->n > 0 && strcmp(f->key[0], "id") == 0 ? f->val[0] : NULL;
    size_t n;

    if (v == NULL)
        return ft__fail(err, FT_ERR_CORRUPT, "no id first (expected id=%llu)", want);
    n = strlen(v);
    if (n > 19 || strspn(v, "0123456789") != n || strtoull(v, NULL, 10) != want)
        return ft__fail(err, FT_ERR_CORRUPT, "id=%s answers no command in flight (expected id=%llu)", v, want);
    return FT_OK;
}

/* A value that must be finite and within [lo, hi]. */
static ft_status in_range(const char *what, double x, double lo, double hi, ft_err *err)
{
    if (!isfinite(x) || x < lo || x > hi)
        return ft__fail(err, FT_ERR_CORRUPT, "%s=%.6g is not within %.6g to %.6g", what, x, lo, hi);
    return FT_OK;
}

static const char *const result_keys[] = {"id",  "status", "median", "q1",        "q3",      "reps", "l2",
                                          "lse", "regs",   "local",  "verify_ms", "time_ms", NULL};

ft_status ft__tune_parse_result(const char *line, unsigned long long id, const ft_problem *shape,
                                double elapsed_ms, ft_tune_reply *out, ft_err *err)
{
    const double waited = fmax(elapsed_ms, 0) + SLACK_MS;
    ft_tune_reply r;
    fields f;
    const char *st;
    long long reps = 0, regs = 0, local = 0;
    ft_status rc;
    int ok;

    memset(&r, 0, sizeof r);
    rc = split_fields(line, "detail", &f, err);
    if (rc == FT_OK && strcmp(f.word, "result") != 0)
        rc = ft__fail(err, FT_ERR_CORRUPT, "'%s' where a result was due", f.word);
    if (rc == FT_OK)
        rc = check_id(&f, id, err);
    if (rc == FT_OK)
        rc = check_keys(&f, result_keys, err);
    if (rc == FT_OK && f.rest == NULL)
        rc = ft__fail(err, FT_ERR_CORRUPT, "detail is missing");
    if (rc != FT_OK)
        goto out;
    st = field_get(&f, "status");
    if (strcmp(st, "error") == 0) {
        r.status = FT_RESULT_LAUNCH_FAILURE; /* the worker could not run it (not in the cache, ...) */
    } else if (!ft__result_status_parse(st, &r.status) ||
               (r.status != FT_RESULT_OK && r.status != FT_RESULT_WRONG_RESULT &&
                r.status != FT_RESULT_LAUNCH_FAILURE && r.status != FT_RESULT_FAULT)) {
        rc = ft__fail(err, FT_ERR_CORRUPT, "status=%s is not a worker's status", st);
        goto out;
    }
    ok = r.status == FT_RESULT_OK;
    rc = field_double(&f, "median", &r.median_ms, err);
    if (rc == FT_OK)
        rc = field_double(&f, "q1", &r.q1_ms, err);
    if (rc == FT_OK)
        rc = field_double(&f, "q3", &r.q3_ms, err);
    if (rc == FT_OK)
        rc = field_double(&f, "l2", &r.max_error, err);
    if (rc == FT_OK)
        rc = field_double(&f, "lse", &r.lse_error, err);
    if (rc == FT_OK)
        rc = field_double(&f, "verify_ms", &r.verify_ms, err);
    if (rc == FT_OK)
        rc = field_double(&f, "time_ms", &r.time_ms, err);
    if (rc == FT_OK)
        rc = field_int(&f, "reps", ok ? 1 : 0, MAX_REPS, &reps, err);
    if (rc == FT_OK)
        rc = field_int(&f, "regs", -1, 255, &regs, err);
    if (rc == FT_OK)
        rc = field_int(&f, "local", -1, 1 << 24, &local, err);
    /* the worker cannot have spent more time than the tuner waited for it */
    if (rc == FT_OK)
        rc = in_range("verify_ms", r.verify_ms, 0, waited, err);
    if (rc == FT_OK)
        rc = in_range("time_ms", r.time_ms, 0, waited, err);
    if (rc == FT_OK)
        rc = in_range("verify_ms + time_ms", r.verify_ms + r.time_ms, 0, waited, err);
    if (rc != FT_OK)
        goto out;
    if (ok) {
        rc = in_range("median", r.median_ms, MIN_MEDIAN_MS, waited, err);
        if (rc == FT_OK)
            rc = in_range("q1", r.q1_ms, MIN_MEDIAN_MS, r.median_ms, err);
        if (rc == FT_OK)
            rc = in_range("q3", r.q3_ms, r.median_ms, waited, err);
        if (rc == FT_OK)
            rc = in_range("l2", r.max_error, 0, ft__op_fwd.tolerance(shape->bf16).l2, err);
        if (rc == FT_OK)
            rc = in_range("lse", r.lse_error, 0, 1e30, err);
        if (rc != FT_OK)
            goto out;
        r.tflops = ft__op_fwd.flops(shape) / (r.median_ms * 1e-3) / 1e12;
        if (r.tflops > FT_TUNE_MAX_TFLOPS) {
            rc = ft__fail(err, FT_ERR_CORRUPT, "median=%.6g ms is %.6g TFLOP/s on the shape (at most %g)",
                          r.median_ms, r.tflops, FT_TUNE_MAX_TFLOPS);
            goto out;
        }
    } else {
        /* nothing of a failure's times is recorded, but they must still be numbers */
        rc = in_range("median", r.median_ms, 0, 1e30, err);
        if (rc == FT_OK)
            rc = in_range("q1", r.q1_ms, 0, 1e30, err);
        if (rc == FT_OK)
            rc = in_range("q3", r.q3_ms, 0, 1e30, err);
        /* a wrong result's error may be NaN or infinite (NaN in the output), never negative */
        if (rc == FT_OK && (r.max_error < 0 || r.lse_error < 0))
            rc = ft__fail(err, FT_ERR_CORRUPT, "a negative error (l2=%.6g lse=%.6g)", r.max_error, r.lse_error);
        if (rc != FT_OK)
            goto out;
        if (!isfinite(r.max_error))
            r.max_error = NAN;
        r.tflops = NAN;
    }
    r.reps = (int)reps;
    r.registers = (int)regs;
    r.local_bytes = (int)local;
    snprintf(r.detail, sizeof r.detail, "%s", f.rest);
    *out = r;
out:
    return rc;
}

/* A worker's answer to a shape: "ok id=N" (*ok = 1), or "error id=N message" (*ok = 0, the
 * message in msg). */
static ft_status parse_ack(const char *line, unsigned long long id, int *ok, char *msg, size_t cap, ft_err *err)
{
    const char *sp = strncmp(line, "error ", 6) == 0 ? strchr(line + 6, ' ') : NULL;
    char head[64];
    size_t n = sp != NULL ? (size_t)(sp - line) : strlen(line);
    fields f;
    ft_status rc = check_text(line, err);

    *ok = 0;
    msg[0] = '\0';
    /* the first two words ("error id=N" or "ok id=N") go through split_fields; an error's
     * message is free text */
    if (rc == FT_OK && n >= sizeof head)
        rc = ft__fail(err, FT_ERR_CORRUPT, "neither 'ok id=N' nor 'error id=N ...'");
    if (rc == FT_OK) {
        memcpy(head, line, n);
        head[n] = '\0';
        rc = split_fields(head, NULL, &f, err);
    }
    if (rc == FT_OK && ((strcmp(f.word, "ok") != 0 && strcmp(f.word, "error") != 0) || f.n != 1))
        rc = ft__fail(err, FT_ERR_CORRUPT, "neither 'ok id=N' nor 'error id=N ...'");
    if (rc == FT_OK)
        rc = check_id(&f, id, err);
    if (rc != FT_OK)
        return rc;
    *ok = strcmp(f.word, "ok") == 0;
    if (!*ok)
        snprintf(msg, cap, "%s", sp != NULL ? sp + 1 : "(no message)");
    return FT_OK;
}

static const char *const ready_keys[] = {"count",      "cc",         "sms",           "smem_block",
                                         "smem_sm",    "regs_sm",    "regs_block",    "threads_block",
                                         "threads_sm", "l2",         "driver",        NULL};

/* The worker's ready line: the GPUs it sees, the target and the fingerprint. */
static ft_status parse_ready(const char *line, int *count, ft_arch *arch, ft_db_device *dev, ft_err *err)
{
    long long v[11];
    static const long long lo[11] = {1, 10, 1, 1, 1, 1, 1, 1, 1, 0, 1};
    static const long long hi[11] = {1 << 16,   1000,      1 << 20,   1LL << 32, 1LL << 32, 1 << 24,
                                     1 << 24,   1 << 20,   1 << 20,   1LL << 40, INT_MAX};
    int major = 0, minor = 0, i;
    fields f;
    ft_status rc = split_fields(line, "name", &f, err);

    if (rc == FT_OK && strcmp(f.word, "ready") != 0)
        rc = ft__fail(err, FT_ERR_CORRUPT, "'%s' where 'ready' was due", f.word);
    if (rc == FT_OK)
        rc = check_keys(&f, ready_keys, err);
    for (i = 0; rc == FT_OK && ready_keys[i] != NULL; i++)
        rc = field_int(&f, ready_keys[i], lo[i], hi[i], &v[i], err);
    if (rc == FT_OK && (f.rest == NULL || f.rest[0] == '\0' || strlen(f.rest) >= sizeof dev->name))
        rc = ft__fail(err, FT_ERR_CORRUPT, "the device name is missing or longer than %zu bytes",
                      sizeof dev->name - 1);
    if (rc != FT_OK)
        return rc;
    memset(arch, 0, sizeof *arch);
    memset(dev, 0, sizeof *dev);
    *count = (int)v[0];
    arch->cc = (int)v[1];
    arch->sms = (int)v[2];
    arch->smem_per_block = v[3];
    arch->smem_per_sm = v[4];
    arch->regs_per_sm = (int)v[5];
    arch->regs_per_block = (int)v[6];
    arch->threads_per_block = (int)v[7];
    arch->threads_per_sm = (int)v[8];
    arch->regs_per_thread = 255;
    arch->from_device = 1;
    snprintf(arch->device_name, sizeof arch->device_name, "%s", f.rest);
    snprintf(arch->name, sizeof arch->name, "sm_%d", arch->cc);
    snprintf(dev->name, sizeof dev->name, "%s", f.rest);
    dev->cc = arch->cc;
    dev->sms = arch->sms;
    dev->smem_per_block = arch->smem_per_block;
    dev->smem_per_sm = arch->smem_per_sm;
    dev->l2_bytes = v[9];
    dev->driver_version = (int)v[10];
    if (ft__nvrtc_version(&major, &minor, err) != FT_OK)
        return FT_ERR_COMPILE;
    snprintf(dev->nvrtc_version, sizeof dev->nvrtc_version, "%d.%d", major, minor);
    return FT_OK;
}

/* ---- workers ------------------------------------------------------------------------------ */

static ft_status worker_start(tuner *tu, worker *w, ft_err *err)
{
    int to[2] = {-1, -1}, from[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t dflt, none;
    char device[16];
    char *argv[8];
    pid_t pid = -1;
    int rc;

    w->pid = -1;
    w->to_fd = w->from_fd = -1;
    w->len = 0;
    snprintf(device, sizeof device, "%d", w->device);
    argv[0] = tu->worker_path;
    argv[1] = "worker";
    argv[2] = "--device";
    argv[3] = device;
    argv[4] = "--cache-dir";
    argv[5] = tu->cache_dir;
    argv[6] = NULL;
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) {
        rc = errno;
        if (to[0] >= 0) {
            close(to[0]);
            close(to[1]);
        }
        return ft__fail(err, FT_ERR_IO, "pipe: %s", strerror(rc));
    }
    /* A worker writing to a tuner that is gone dies of SIGPIPE (the tuner ignores it, and an
     * ignored signal would stay ignored across exec). */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    rc = posix_spawn(&pid, tu->worker_path, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(to[0]);
    close(from[1]);
    if (rc != 0) {
        close(to[1]);
        close(from[0]);
        return ft__fail(err, FT_ERR_IO, "cannot start the worker %s: %s", tu->worker_path, strerror(rc));
    }
    /* never blocked by a worker: writes and reads wait in poll, with a deadline */
    fcntl(to[1], F_SETFL, O_NONBLOCK);
    fcntl(from[0], F_SETFL, O_NONBLOCK);
    w->pid = pid;
    w->to_fd = to[1];
    w->from_fd = from[0];
    w->waiting = P_READY;
    w->sent = ft__now_ms();
    w->deadline = w->sent + BOOT_TIMEOUT_MS;
    return FT_OK;
}

static void sleep_ms(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    nanosleep(&ts, NULL);
}

/* Closes the worker's pipes and reaps it: it has grace_ms to exit by itself (less once the
 * stop flag is set), then it is killed. Returns its wait status, or -1 when there was none. */
static int worker_reap(const tuner *tu, worker *w, double grace_ms)
{
    const double until = ft__now_ms() + grace_ms;
    int status = -1;

    if (w->pid <= 0)
        return -1;
    close(w->to_fd);
    close(w->from_fd);
    w->to_fd = w->from_fd = -1;
    for (;;) {
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid || (r < 0 && errno != EINTR)) {
            if (r < 0)
                status = -1;
            break;
        }
        if (r == 0 && (ft__now_ms() >= until || stopped(tu))) {
            kill(w->pid, SIGKILL);
            do
                r = waitpid(w->pid, &status, 0);
            while (r < 0 && errno == EINTR);
            if (r < 0)
                status = -1;
            break;
        }
        if (r == 0)
            sleep_ms(5);
    }
    w->pid = -1;
    w->len = 0;
    return status;
}

/* Ends a worker: told to quit (with QUIT_GRACE_MS to do it) or killed, and reaped either way. */
static void worker_stop(const tuner *tu, worker *w, int kill_it)
{
    if (w->pid <= 0)
        return;
    if (kill_it || write(w->to_fd, "quit\n", 5) != 5)
        kill(w->pid, SIGKILL);
    worker_reap(tu, w, kill_it ? 0 : QUIT_GRACE_MS);
}

/* Sends a command; its answer is due within timeout_ms. 0: the worker took nothing within
 * SEND_TIMEOUT_MS, or is gone, or the stop flag is set. */
static int worker_send(const tuner *tu, worker *w, const char *line, double timeout_ms)
{
    const double until = ft__now_ms() + SEND_TIMEOUT_MS;
    size_t n = strlen(line), done = 0;

    while (done < n) {
        ssize_t k = write(w->to_fd, line + done, n - done);
        int again = k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if ((k < 0 && errno != EINTR && !again) || stopped(tu) || ft__now_ms() >= until)
            return 0;
        if (again) {
            struct pollfd p = {w->to_fd, POLLOUT, 0};
            poll(&p, 1, 100);
        }
    }
    w->sent = ft__now_ms();
    w->deadline = w->sent + timeout_ms;
    return 1;
}

/* Reads what the worker has sent into its buffer (at most what fits). 0: end of file or an
 * error (the worker is gone); 1: otherwise, also when nothing was there yet. */
static int worker_read(worker *w)
{
    for (;;) {
        ssize_t k;
        if (w->len == sizeof w->buf)
            return 1; /* full: worker_line says the line is too long */
        k = read(w->from_fd, w->buf + w->len, sizeof w->buf - w->len);
        if (k > 0) {
            w->len += (size_t)k;
            return 1;
        }
        if (k == 0)
            return 0;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }
}

/* Takes one complete line out of the worker's buffer: 1 (the line in out, cap >= LINE_MAX_BYTES),
 * 0 (no complete line yet), -1 (a line longer than the limit, or a NUL byte: why says which). */
static int worker_line(worker *w, char *out, size_t cap, char *why, size_t why_cap)
{
    char *nl = memchr(w->buf, '\n', w->len);
    size_t n;

    if (nl == NULL) {
        if (w->len < sizeof w->buf && w->len < cap)
            return 0;
        snprintf(why, why_cap, "a line longer than %d bytes", LINE_MAX_BYTES - 1);
        return -1;
    }
    n = (size_t)(nl - w->buf);
    if (n >= cap || memchr(w->buf, '\0', n) != NULL) {
        snprintf(why, why_cap, n >= cap ? "a line longer than %d bytes" : "a NUL byte in a line",
                 LINE_MAX_BYTES - 1);
        return -1;
    }
    memcpy(out, w->buf, n);
    out[n] = '\0';
    w->len -= n + 1;
    memmove(w->buf, nl + 1, w->len);
    return 1;
}

/* Starts a worker and waits for its ready line, which fills w->count, w->arch and w->dev. */
static ft_status worker_boot(tuner *tu, worker *w, ft_err *err)
{
    char line[LINE_MAX_BYTES], why[256], shown[512];
    ft_status rc = worker_start(tu, w, err);

    while (rc == FT_OK) {
        struct pollfd pfd = {w->from_fd, POLLIN, 0};
        double left = w->deadline - ft__now_ms();
        int got = worker_line(w, line, sizeof line, why, sizeof why);
        if (got < 0) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker's ready line: %s", w->device, why);
            break;
        }
        if (got > 0 && strncmp(line, "error ", 6) == 0) { /* the worker's own reason: no GPU, ... */
            printable(line + 6, shown, sizeof shown);
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: %s", w->device, shown);
            break;
        }
        if (got > 0) {
            ft_err perr;
            ft_status prc = parse_ready(line, &w->count, &w->arch, &w->dev, &perr);
            if (prc == FT_ERR_COMPILE) { /* NVRTC's version: not the worker's fault */
                *err = perr;
                rc = prc;
                break;
            }
            if (prc != FT_OK) {
                printable(line, shown, 200);
                rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker's ready line: %s (%s)", w->device, perr.msg,
                              shown);
                break;
            }
            w->waiting = P_NONE;
            return FT_OK;
        }
        if (stopped(tu)) {
            rc = interrupted(tu, err);
            break;
        }
        if (left <= 0) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker did not start within %.0f s", w->device,
                          BOOT_TIMEOUT_MS / 1e3);
            break;
        }
        if (poll(&pfd, 1, (int)fmin(left, 1000)) < 0 && errno != EINTR) {
            rc = ft__fail(err, FT_ERR_IO, "poll: %s", strerror(errno));
            break;
        }
        if (!worker_read(w)) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker exited before it was ready", w->device);
            break;
        }
    }
    worker_stop(tu, w, 1);
    return rc;
}

/* ---- recording ---------------------------------------------------------------------------- */

static void fill_result(tuner *tu, const task *t, const kernel_ref *kr, ft_result_status st, const char *reason,
                        ft_db_result *r)
{
    memset(r, 0, sizeof *r);
    r->device_id = tu->device_id;
    r->kernel_id = kr->kernel_id;
    r->key = t->key;
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

/* A checked measurement reply for job j of task t. */
static ft_status on_result(tuner *tu, task *t, int j, const ft_tune_reply *rep, ft_err *err)
{
    const kernel_ref *kr = &tu->kernels[t->jobs[j]];
    ft_db_result r;

    fill_result(tu, t, kr, rep->status, rep->detail, &r);
    if (rep->status == FT_RESULT_OK) {
        r.median_ms = rep->median_ms;
        r.iqr_ms = rep->q3_ms - rep->q1_ms;
        r.tflops = rep->tflops;
        r.repetitions = rep->reps;
    }
    if (rep->status == FT_RESULT_OK || rep->status == FT_RESULT_WRONG_RESULT)
        r.max_error = rep->max_error;
    tu->sum->verify_ms += rep->verify_ms;
    tu->sum->time_ms += rep->time_ms;
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
    const ft_db_result *r = &row->result;
    int i;

    if (r->device_id != c->tu->device_id || !ft__key_equal(&r->key, &c->t->key) || r->status != FT_RESULT_OK ||
        row->stale || !(r->median_ms > 0) || !isfinite(r->median_ms))
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
    f.op = t->key.op;
    f.dtype = t->key.dtype;
    f.head_dim = (int)ft__key_get(&t->key, "d", -1);
    f.causal = (int)ft__key_get(&t->key, "causal", -1);
    f.device_name = tu->dev.name;
    rc = ft__db_query(tu->db, &f, collect_row, c, err);
    t->nleaders = 0;
    if (rc != FT_OK || c->n < 2)
        goto out;
    best = c->rows[0].result.median_ms;
    margin = fmax(0.02 * best, 2 * (isfinite(c->rows[0].result.iqr_ms) ? c->rows[0].result.iqr_ms : 0));
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

/* The race is over: each leader whose rounds all came back (checked times, NAN where a round
 * failed) gets the median of its rounds. */
static ft_status finish_race(tuner *tu, task *t, ft_err *err)
{
    ft_status rc = FT_OK;
    int i, k;

    for (i = 0; i < t->nleaders && rc == FT_OK; i++) {
        double ms[RACE_ROUNDS];
        ft_db_result r = t->leaders[i].result;
        int n = 0;
        for (k = 0; k < RACE_ROUNDS; k++)
            if (t->race_ms[i][k] > 0 && isfinite(t->race_ms[i][k]))
                ms[n++] = t->race_ms[i][k];
        if (n < RACE_ROUNDS)
            continue; /* a round failed: the leader keeps its own measurement */
        qsort(ms, (size_t)n, sizeof ms[0], cmp_double);
        r.median_ms = ms[n / 2];
        r.tflops = ft__op_fwd.flops(&t->shape) / (r.median_ms * 1e-3) / 1e12;
        rc = ft__db_record(tu->db, &r, err);
    }
    if (rc == FT_OK)
        tu->sum->races++;
    return rc;
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
        if (ft__key_equal(&tu->tasks[j].key, &tu->tasks[i].key))
            return 0;
    return 1;
}

/* Stores the winner's cubin and source with its kernel row, for dispatch and export. */
static ft_status store_winner(tuner *tu, task *t, ft_err *err)
{
    ft_db_row row;
    int found = 0, k;
    ft_status rc = ft__db_winner(tu->db, tu->device_id, &t->key, &row, NULL, NULL, &found, err);
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

/* The measure command for a kernel, with id; returns its plan item. */
static const ft_plan_item *measure_line(const tuner *tu, const kernel_ref *kr, unsigned long long id, int verify,
                                        int budget, char *out, size_t cap)
{
    const ft_plan_item *it = &tu->plans[kr->spec]->items[kr->item];
    const ft_spec *spec = tu->specs[kr->spec];
    /* Kernels reading Q, K and V through tensor maps need the K/V box rows (0: no maps) and
     * the balance knob (the grid); the head dim and causality come with the shape. */
    const int tma = tu->plans[kr->spec]->family->uses_tma;
    char hex[65];

    ft__sha256_hex(it->key, hex);
    snprintf(out, cap,
             "measure id=%llu key=%s entry=%s threads=%d rows=%lld smem=%lld verify=%d budget=%d tma_kv=%lld "
             "balance=%lld\n",
             id, hex, it->source.entry, it->threads, ft__variant_int(spec, &it->variant, "bm", 64),
             it->smem_dynamic, verify, budget, tma ? ft__variant_int(spec, &it->variant, "bn", 64) : 0,
             ft__variant_int(spec, &it->variant, "balance", 0));
    return it;
}

static void skip_bucket(tuner *tu, task *t, const char *why)
{
    char shown[600];

    printable(why, shown, sizeof shown);
    fprintf(stderr, "flashtune tune: bucket %s d=%d causal=%d seqlen %d: %s; skipped\n", t->key.dtype,
            t->shape.head_dim, t->shape.causal, t->shape.seqlen_k, shown);
    t->failed = 1;
    tu->done += t->njobs - t->next + (t->redo >= 0);
    t->redo = -1;
}

/* Sends the worker its next command; returns 0 when it has nothing left to do, -1 when the
 * command could not be sent. */
static int dispatch(tuner *tu, worker *w, ft_err *err, ft_status *rc)
{
    char line[1024];

    while (w->cur < w->ntasks) {
        task *t = &tu->tasks[w->tasks[w->cur]];
        if (t->failed || t->njobs == 0) { /* nothing left to measure: no need for its shape */
            w->cur++;
            continue;
        }
        if (!t->shape_ready) {
            w->id = ++w->ids;
            snprintf(line, sizeof line,
                     "shape id=%llu b=%d hq=%d hkv=%d sq=%d sk=%d d=%d causal=%d bf16=%d seed=%d\n", w->id,
                     t->shape.batch, t->shape.heads_q, t->shape.heads_kv, t->shape.seqlen_q, t->shape.seqlen_k,
                     t->shape.head_dim, t->shape.causal, t->shape.bf16, 17 + w->tasks[w->cur]);
            w->waiting = P_SHAPE;
            return worker_send(tu, w, line, 600e3) ? 1 : -1;
        }
        if (t->redo >= 0 || t->next < t->njobs) {
            int job = t->redo >= 0 ? t->redo : t->next++;
            const ft_plan_item *it;
            t->redo = -1;
            w->id = ++w->ids;
            it = measure_line(tu, &tu->kernels[t->jobs[job]], w->id, 1, tu->o->budget_ms, line, sizeof line);
            w->waiting = P_MEASURE;
            w->job = job;
            progress(tu, it->variant_str);
            return worker_send(tu, w, line, tu->o->timeout_s * 1e3) ? 1 : -1;
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
                w->id = ++w->ids;
                measure_line(tu, &tu->kernels[k], w->id, 0, tu->o->budget_ms / 2 + 1, line, sizeof line);
                w->waiting = P_RACE;
                w->job = t->race_next++;
                return worker_send(tu, w, line, tu->o->timeout_s * 1e3) ? 1 : -1;
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

/* How a worker failed: it exited (or its output ended), did not answer in time, broke the
 * protocol, or did not take a command (it was gone before the command reached it). */
typedef enum failure { F_EXITED, F_TIMEOUT, F_PROTOCOL, F_SEND } failure;

/* Worker w failed (kind, and why says how), perhaps with a command in flight. It is killed
 * and reaped first, so nothing it sends later counts. A measurement in flight is recorded as a
 * fault or a timeout; after a protocol error, or when the command never reached the worker, it
 * is first tried once more on a new worker (the fault may have been the line before). A shape
 * likewise, then its bucket is skipped; a race round gets no time. Then a new worker starts,
 * unless the stop flag is set (nothing is recorded then) or this was the PROTOCOL_STRIKES-th
 * protocol error without a good measurement between (the tune ends with an error). */
static ft_status worker_failed(tuner *tu, worker *w, failure kind, const char *why, ft_err *err)
{
    task *t = w->cur < w->ntasks ? &tu->tasks[w->tasks[w->cur]] : NULL;
    const pending was = w->waiting;
    const int protocol = kind == F_PROTOCOL, again = protocol || kind == F_SEND;
    ft_status rc = FT_OK;
    char reason[512];

    worker_stop(tu, w, 1);
    w->waiting = P_NONE;
    if (stopped(tu))
        return interrupted(tu, err);
    if (protocol) {
        tu->sum->protocol_errors++;
        w->strikes++;
    }
    snprintf(reason, sizeof reason, "%s%s",
             protocol ? "the worker broke the protocol twice: " : kind == F_SEND ? "twice: " : "", why);
    if (t != NULL && was == P_MEASURE) {
        if (again && !t->retried[w->job]) {
            t->retried[w->job] = 1;
            t->redo = w->job;
        } else {
            ft_db_result r;
            fill_result(tu, t, &tu->kernels[t->jobs[w->job]], kind == F_TIMEOUT ? FT_RESULT_TIMEOUT : FT_RESULT_FAULT,
                        reason, &r);
            tu->sum->measured++;
            tu->done++;
            t->dirty = 1;
            rc = record(tu, &r, err);
        }
    } else if (t != NULL && was == P_SHAPE) {
        if (again && !t->shape_retried)
            t->shape_retried = 1;
        else
            skip_bucket(tu, t, reason);
    } else if (t != NULL && was == P_RACE) {
        t->race_ms[w->job % t->nleaders][w->job / t->nleaders] = NAN;
    }
    if (rc != FT_OK)
        return rc;
    if (w->strikes >= PROTOCOL_STRIKES)
        return ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker broke the protocol %d times in a row (last: %s)",
                        w->device, w->strikes, why);
    tu->sum->worker_restarts++;
    if (t != NULL)
        t->shape_ready = 0;
    return worker_boot(tu, w, err);
}

/* Handles a line from worker w. One that breaks the protocol fills why (and changes nothing);
 * the caller replaces the worker. */
static ft_status on_line(tuner *tu, worker *w, const char *line, char *why, size_t cap, ft_err *err)
{
    task *t = &tu->tasks[w->tasks[w->cur]];
    const double elapsed = ft__now_ms() - w->sent;
    ft_tune_reply rep;
    ft_err perr;
    ft_status rc = FT_OK;
    char msg[512];
    int ok = 0;

    why[0] = '\0';
    switch (w->waiting) {
    case P_SHAPE:
        if (parse_ack(line, w->id, &ok, msg, sizeof msg, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        if (ok)
            t->shape_ready = 1;
        else
            skip_bucket(tu, t, msg);
        return FT_OK;
    case P_MEASURE:
        if (ft__tune_parse_result(line, w->id, &t->shape, elapsed, &rep, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        w->strikes = 0;
        rc = on_result(tu, t, w->job, &rep, err);
        tu->done++;
        if (rc == FT_OK && rep.status == FT_RESULT_FAULT) {
            /* the worker exits after a fault; start another */
            worker_stop(tu, w, 1);
            tu->sum->worker_restarts++;
            t->shape_ready = 0;
            rc = worker_boot(tu, w, err);
        }
        return rc;
    case P_RACE:
        if (ft__tune_parse_result(line, w->id, &t->shape, elapsed, &rep, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        w->strikes = 0;
        t->race_ms[w->job % t->nleaders][w->job / t->nleaders] =
            rep.status == FT_RESULT_OK ? rep.median_ms : NAN;
        if (rep.status == FT_RESULT_FAULT) {
            worker_stop(tu, w, 1);
            tu->sum->worker_restarts++;
            t->shape_ready = 0;
            rc = worker_boot(tu, w, err);
        }
        return rc;
    default:
        snprintf(perr.msg, sizeof perr.msg, "a line with no command in flight");
        break;
    }
    {
        char shown[200];
        printable(line, shown, sizeof shown);
        snprintf(why, cap, "%s, in '%s%s'", perr.msg, shown, strlen(line) > 120 ? "..." : "");
    }
    return FT_OK;
}

/* Reads from worker w (revents: what poll saw) and handles its complete lines. A worker that
 * exited, sent a line too long, malformed or unasked for, or let its deadline pass (whether or
 * not it sent anything) is replaced (worker_failed). */
static ft_status service(tuner *tu, worker *w, short revents, ft_err *err)
{
    char line[LINE_MAX_BYTES], why[1024];
    ft_status rc;
    int got;

    if ((revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) && !worker_read(w)) {
        int status = worker_reap(tu, w, EXIT_GRACE_MS);
        int sig = status != -1 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        /* Ctrl-C reaches the worker too, perhaps before the tuner's own flag is set: a worker
         * stopped by a user's signal is an interrupt, not its kernel's fault */
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) {
            w->waiting = P_NONE;
            return ft__fail(err, FT_ERR_INTERRUPTED, "interrupted: GPU %d's worker was stopped (signal %d); %lld "
                            "measurements were recorded",
                            w->device, sig, tu->sum->measured);
        }
        if (status != -1 && WIFSIGNALED(status))
            snprintf(why, sizeof why, "the worker died (signal %d)", WTERMSIG(status));
        else if (status != -1)
            snprintf(why, sizeof why, "the worker exited with status %d", WEXITSTATUS(status));
        else
            snprintf(why, sizeof why, "the worker's output ended");
        return worker_failed(tu, w, F_EXITED, why, err);
    }
    for (;;) {
        if (w->waiting == P_NONE) {
            if (w->len > 0)
                return worker_failed(tu, w, F_PROTOCOL, "it sent more than its answer", err);
            return FT_OK;
        }
        got = worker_line(w, line, sizeof line, why, sizeof why);
        if (got < 0)
            return worker_failed(tu, w, F_PROTOCOL, why, err);
        if (got == 0)
            break;
        rc = on_line(tu, w, line, why, sizeof why, err);
        if (rc != FT_OK)
            return rc;
        if (why[0] != '\0')
            return worker_failed(tu, w, F_PROTOCOL, why, err);
    }
    if (ft__now_ms() > w->deadline) {
        snprintf(why, sizeof why, "no answer within the timeout of %.0f s (hung?)",
                 (w->deadline - w->sent) / 1e3);
        return worker_failed(tu, w, F_TIMEOUT, why, err);
    }
    return FT_OK;
}

static ft_status run_workers(tuner *tu, ft_err *err)
{
    ft_status rc = FT_OK;
    struct pollfd pfd[64];
    int map[64];
    int i;

    for (;;) {
        int n = 0;
        double wait_ms = 1000;

        if (stopped(tu))
            return interrupted(tu, err);
        for (i = 0; i < tu->nworkers; i++) {
            worker *w = &tu->workers[i];
            /* a command that does not reach the worker: a new worker, and the next command
             * (the same one once more, or what worker_failed left); each job, race round and
             * shape is sent at most twice, so this ends */
            while (w->waiting == P_NONE) {
                int d = dispatch(tu, w, err, &rc);
                if (rc != FT_OK)
                    return rc;
                if (d >= 0)
                    break;
                rc = worker_failed(tu, w, F_SEND, "the worker took no command (gone, or not reading)", err);
                if (rc != FT_OK)
                    return rc;
            }
            if (w->waiting != P_NONE) {
                pfd[n].fd = w->from_fd;
                pfd[n].events = POLLIN;
                pfd[n].revents = 0;
                map[n++] = i;
                wait_ms = fmin(wait_ms, w->deadline - ft__now_ms());
            }
        }
        if (n == 0)
            return FT_OK;
        if (poll(pfd, (nfds_t)n, (int)fmax(0, wait_ms)) < 0 && errno != EINTR)
            return ft__fail(err, FT_ERR_IO, "poll: %s", strerror(errno));
        for (i = 0; i < n; i++) {
            rc = service(tu, &tu->workers[map[i]], pfd[i].revents, err);
            if (rc != FT_OK)
                return rc;
        }
    }
}

/* ---- setup -------------------------------------------------------------------------------- */

static ft_status start_workers(tuner *tu, ft_err *err)
{
    ft_status rc;
    int i;

    tu->workers = calloc(64, sizeof *tu->workers);
    if (tu->workers == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    tu->workers[0].device = tu->o->device < 0 ? 0 : tu->o->device;
    tu->nworkers = 1;
    rc = worker_boot(tu, &tu->workers[0], err);
    if (rc != FT_OK)
        return rc;
    tu->arch = tu->workers[0].arch;
    tu->dev = tu->workers[0].dev;
    if (tu->o->device >= 0)
        return FT_OK;
    for (i = 1; i < tu->workers[0].count && i < 64; i++) {
        const ft_db_device *d = &tu->workers[i].dev;
        tu->workers[i].device = i;
        tu->nworkers++;
        rc = worker_boot(tu, &tu->workers[i], err);
        if (rc != FT_OK)
            return rc;
        if (!ft__db_device_same_model(d, &tu->dev) || !ft__db_device_same_driver(d, &tu->dev))
            return ft__fail(err, FT_ERR_UNSUPPORTED,
                            "--device all needs identical GPUs, but GPU 0 is %s and GPU %d is %s (driver %d vs %d); "
                            "tune each with --device N",
                            tu->dev.name, i, d->name, tu->dev.driver_version, d->driver_version);
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

/* The key of a target's calls. */
static void target_key(const target *t, ft_key *out)
{
    ft_problem p;

    memset(&p, 0, sizeof p);
    p.batch = t->wl.b, p.heads_q = t->wl.hq, p.heads_kv = t->wl.hkv;
    p.seqlen_q = t->wl.sq, p.seqlen_k = t->wl.sk, p.head_dim = t->wl.d;
    p.causal = t->causal;
    p.bf16 = strcmp(t->dtype, "bf16") == 0;
    ft__op_fwd.key(&p, out);
}

static void workload_problem(const ft_workload *wl, ft_problem *p)
{
    memset(p, 0, sizeof *p);
    p->batch = wl->b, p->heads_q = wl->hq, p->heads_kv = wl->hkv;
    p->seqlen_q = wl->sq, p->seqlen_k = wl->sk, p->head_dim = wl->d;
}

/* The spec's workloads crossed with its dtypes and causal values; a workload the tuner cannot
 * set up is an error naming the spec. */
static ft_status spec_targets(const ft_spec *spec, target_list *l, ft_err *err)
{
    int di = ft__spec_param_index(spec, "dtype"), ci = ft__spec_param_index(spec, "causal");
    int ndt = di >= 0 ? spec->params[di].nvalues : 1, nc = ci >= 0 ? spec->params[ci].nvalues : 1;
    ft_status rc = FT_OK;
    int w, dt, c;

    for (w = 0; w < spec->nworkloads && rc == FT_OK; w++) {
        ft_problem p;
        char shape[128];
        workload_problem(&spec->workloads[w], &p);
        rc = ft__tune_check_shape(&p, err);
        if (rc != FT_OK) {
            ft__problem_format(&p, shape, sizeof shape);
            ft__err_prefix(err, "%s: workloads[%d] (%s)", spec->path, w + 1, shape);
            break;
        }
    }
    for (w = 0; w < spec->nworkloads && rc == FT_OK; w++)
        for (dt = 0; dt < ndt && rc == FT_OK; dt++)
            for (c = 0; c < nc && rc == FT_OK; c++)
                rc = target_add(l, &spec->workloads[w], di >= 0 ? spec->params[di].strings[dt] : "f16",
                                ci >= 0 ? (int)spec->params[ci].ints[c] : 0, err);
    return rc;
}

typedef struct miss_collect {
    tuner *tu;
    target_list *l;
    ft_status rc;
    ft_err *err;
} miss_collect;

/* Whether some spec of the tune has a variant of head dim d (or no head dim parameter). */
static int spec_has_head_dim(const tuner *tu, int d)
{
    int s, i;

    for (s = 0; s < tu->nspecs; s++) {
        const ft_spec *spec = tu->specs[s];
        int di = ft__spec_param_index(spec, "d");
        if (di < 0 || spec->params[di].kind != FT_PARAM_INT)
            return 1;
        for (i = 0; i < spec->params[di].nvalues; i++)
            if (spec->params[di].ints[i] == d)
                return 1;
    }
    return 0;
}

/* A recorded miss is used only if its shape passes the checks a call's arguments pass (and
 * ft__tune_check_shape), lies in its recorded bucket, and some spec has its head dim. The
 * database is not trusted: anything could have written it. */
static ft_status check_miss(const tuner *tu, const ft_db_miss *m, ft_err *err)
{
    ft_problem p;
    ft_key k;
    ft_status rc;
    long long causal = ft__key_get(&m->key, "causal", -1);

    if (m->key.op != &ft__op_fwd)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the operation is not the forward one");
    memset(&p, 0, sizeof p);
    p.batch = m->batch, p.heads_q = m->heads_q, p.heads_kv = m->heads_kv;
    p.seqlen_q = m->seqlen_q, p.seqlen_k = m->seqlen_k, p.head_dim = (int)ft__key_get(&m->key, "d", 0);
    if (strcmp(m->key.dtype, "f16") != 0 && strcmp(m->key.dtype, "bf16") != 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the dtype is neither f16 nor bf16");
    if (causal != 0 && causal != 1)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "causal is %lld, not 0 or 1", causal);
    p.causal = (int)causal;
    p.bf16 = strcmp(m->key.dtype, "bf16") == 0;
    rc = ft__tune_check_shape(&p, err);
    if (rc != FT_OK)
        return rc;
    m->key.op->key(&p, &k);
    if (!ft__key_equal(&k, &m->key))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                        "the shape is not in the recorded bucket (seqlen <= %lld, b*h <= %lld) but in seqlen <= %lld, "
                        "b*h <= %lld",
                        ft__key_get(&m->key, "seqlen", 0), ft__key_get(&m->key, "bh", 0), ft__key_get(&k, "seqlen", 0),
                        ft__key_get(&k, "bh", 0));
    if (!spec_has_head_dim(tu, p.head_dim))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "no spec has kernels of head dim %d", p.head_dim);
    return FT_OK;
}

/* A miss of this GPU model (any driver or NVRTC version), once per bucket: the shape of the
 * first call that missed. An invalid one is reported and skipped. */
static int collect_miss(void *ud, const ft_db_miss *m)
{
    miss_collect *mc = ud;
    ft_workload wl;
    ft_err why;
    int i;

    if (!ft__db_device_same_model(&m->device, &mc->tu->dev))
        return 0;
    if (check_miss(mc->tu, m, &why) != FT_OK) {
        char dtype[40];
        printable(m->key.dtype, dtype, sizeof dtype);
        fprintf(stderr,
                "flashtune tune: skipping the recorded miss %s d=%lld causal=%lld b=%d,hq=%d,hkv=%d,sq=%d,sk=%d "
                "(driver %d): %s\n",
                dtype, ft__key_get(&m->key, "d", 0), ft__key_get(&m->key, "causal", 0), m->batch, m->heads_q,
                m->heads_kv, m->seqlen_q,
                m->seqlen_k, m->device.driver_version, why.msg);
        mc->tu->sum->misses_invalid++;
        return 0;
    }
    for (i = 0; i < mc->l->n; i++) {
        ft_key k;
        target_key(&mc->l->v[i], &k);
        if (ft__key_equal(&k, &m->key))
            return 0;
    }
    wl.b = m->batch, wl.hq = m->heads_q, wl.hkv = m->heads_kv;
    wl.sq = m->seqlen_q, wl.sk = m->seqlen_k, wl.d = (int)ft__key_get(&m->key, "d", 0);
    mc->rc = target_add(mc->l, &wl, m->key.dtype, (int)ft__key_get(&m->key, "causal", 0), mc->err);
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
    ft__op_fwd.key(&t->shape, &t->key);
    t->redo = -1;
    t->jobs = calloc((size_t)tu->nkernels + 1, sizeof *t->jobs);
    t->retried = calloc((size_t)tu->nkernels + 1, 1);
    if (t->jobs == NULL || t->retried == NULL) {
        free(t->jobs);
        free(t->retried);
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    }
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
            rc = ft__db_has_result(tu->db, tu->device_id, kr->kernel_id, &t->key, &has, err);
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
        free(t->retried);
        return rc;
    }
    tu->planned += t->njobs;
    tu->ntasks++;
    return FT_OK;
}

/* The buckets the runtime library recorded as misses on this GPU model. */
static ft_status miss_targets(tuner *tu, target_list *l, ft_err *err)
{
    miss_collect mc = {tu, l, FT_OK, err};
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
        if (strlen(worker_cmd) >= sizeof tu->worker_path)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the worker's path is longer than %zu bytes",
                            sizeof tu->worker_path - 1);
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
    /* the GPU first: a tune that cannot start leaves no database behind */
    rc = start_workers(&tu, err);
    if (rc != FT_OK)
        goto out;
    snprintf(summary->device_name, sizeof summary->device_name, "%s", tu.dev.name);
    rc = ft__db_open(o->db_path, 0, &tu.db, err);
    if (rc != FT_OK)
        goto out;
    snprintf(summary->db_path, sizeof summary->db_path, "%s", ft__db_path(tu.db));
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
        worker_stop(&tu, &tu.workers[i], rc != FT_OK);
        free(tu.workers[i].tasks);
    }
    free(tu.workers);
    free(misses.v);
    for (i = 0; i < tu.ntasks; i++) { /* the buckets that have a winner now */
        ft_db_row row;
        ft_err ignored;
        int found = 0;
        if (first_of_bucket(&tu, i) &&
            ft__db_winner(tu.db, tu.device_id, &tu.tasks[i].key, &row, NULL, NULL, &found, &ignored) == FT_OK)
            summary->winners += found;
    }
    for (i = 0; i < tu.ntasks; i++) {
        free(tu.tasks[i].jobs);
        free(tu.tasks[i].retried);
    }
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
    worker *w = NULL;

    tu = calloc(1, sizeof *tu);
    w = calloc(1, sizeof *w);
    if (tu == NULL || w == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    w->device = device;
    rc = tuner_open(tu, worker_cmd, cache_dir, err);
    if (rc != FT_OK)
        goto out;
    rc = worker_boot(tu, w, err);
    if (rc != FT_OK)
        goto out;
    *dev = w->dev;
    worker_stop(tu, w, 0);
out:
    if (tu != NULL)
        ft__cache_close(tu->cache);
    free(tu);
    free(w);
    return rc;
}
