/*
 * The tuner's side of the worker protocol (tuner/worker.c has the other): the checks of a
 * shape, and the parsing of what a worker sends — every line bounded, every field checked.
 */
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
#include "ops/problem.h"
#include "runtime/compile.h"
#include "runtime/verify.h"
#include "tuner/plan.h"
#include "tuner/internal.h"

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

ft_status ft__tune_parse_result(const char *line, unsigned long long id, const ft_op *op, const ft_problem *shape,
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
            rc = in_range("l2", r.max_error, 0, op->tolerance(shape->bf16).l2, err);
        if (rc == FT_OK)
            rc = in_range("lse", r.lse_error, 0, 1e30, err);
        if (rc != FT_OK)
            goto out;
        r.tflops = op->flops(shape) / (r.median_ms * 1e-3) / 1e12;
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
ft_status ft__tuner_parse_ack(const char *line, unsigned long long id, int *ok, char *msg, size_t cap, ft_err *err)
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
ft_status ft__tuner_parse_ready(const char *line, int *count, ft_arch *arch, ft_db_device *dev, ft_err *err)
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


ft_status ft__tune_parse_race(const char *line, unsigned long long id, const ft_op *op, const ft_problem *shape,
                              int n, int rounds, double elapsed_ms, ft_race_reply *out, ft_err *err)
{
    static const char *const base_keys[] = {"id", "status", "time_ms", NULL};
    const double waited = fmax(elapsed_ms, 0) + SLACK_MS;
    ft_race_reply r;
    fields f;
    const char *st;
    ft_status rc;
    int i, k, ok;

    memset(&r, 0, sizeof r);
    if (n < 1 || n > FT_TUNE_RACE_KERNELS || rounds < 1 || rounds > FT_TUNE_RACE_ROUNDS)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "a race of %d kernels in %d rounds", n, rounds);
    rc = split_fields(line, "detail", &f, err);
    if (rc == FT_OK && strcmp(f.word, "raced") != 0)
        rc = ft__fail(err, FT_ERR_CORRUPT, "'%s' where a race's result was due", f.word);
    if (rc == FT_OK)
        rc = check_id(&f, id, err);
    if (rc == FT_OK && f.rest == NULL)
        rc = ft__fail(err, FT_ERR_CORRUPT, "detail is missing");
    if (rc != FT_OK)
        return rc;
    st = field_get(&f, "status");
    if (st == NULL)
        return ft__fail(err, FT_ERR_CORRUPT, "status is missing");
    if (strcmp(st, "error") == 0)
        r.status = FT_RESULT_LAUNCH_FAILURE;
    else if (!ft__result_status_parse(st, &r.status) ||
             (r.status != FT_RESULT_OK && r.status != FT_RESULT_LAUNCH_FAILURE && r.status != FT_RESULT_FAULT))
        return ft__fail(err, FT_ERR_CORRUPT, "status=%s is not a race's status", st);
    ok = r.status == FT_RESULT_OK;
    /* the keys: id, status, time_ms, and ms0 .. ms<n-1> on an ok race, nothing else */
    for (i = 0; i < f.n; i++) {
        for (k = 0; base_keys[k] != NULL && strcmp(base_keys[k], f.key[i]) != 0; k++)
            ;
        if (base_keys[k] == NULL) {
            char *end;
            long m = f.key[i][0] == 'm' && f.key[i][1] == 's' && f.key[i][2] >= '0' && f.key[i][2] <= '9'
                         ? strtol(f.key[i] + 2, &end, 10) : -1;
            if (!ok || m < 0 || m >= n || *end != '\0' || (f.key[i][2] == '0' && f.key[i][3] != '\0'))
                return ft__fail(err, FT_ERR_CORRUPT, "unknown field %s", f.key[i]);
        }
    }
    if (f.n != 3 + (ok ? n : 0))
        return ft__fail(err, FT_ERR_CORRUPT, "%d fields where %d were due", f.n, 3 + (ok ? n : 0));
    rc = field_double(&f, "time_ms", &r.time_ms, err);
    if (rc == FT_OK)
        rc = in_range("time_ms", r.time_ms, 0, waited, err);
    for (i = 0; rc == FT_OK && ok && i < n; i++) {
        char key[8], what[24];
        const char *v;
        snprintf(key, sizeof key, "ms%d", i);
        v = field_get(&f, key);
        if (v == NULL)
            return ft__fail(err, FT_ERR_CORRUPT, "%s is missing", key);
        for (k = 0; rc == FT_OK && k < rounds; k++) {
            char *end;
            double x = strtod(v, &end), tflops;
            snprintf(what, sizeof what, "%s[%d]", key, k);
            if (end == v || *end != (k + 1 < rounds ? ',' : '\0'))
                return ft__fail(err, FT_ERR_CORRUPT, "%s=%s is not %d numbers separated by commas", key,
                                field_get(&f, key), rounds);
            rc = in_range(what, x, MIN_MEDIAN_MS, waited, err);
            tflops = rc == FT_OK ? op->flops(shape) / (x * 1e-3) / 1e12 : 0;
            if (rc == FT_OK && tflops > FT_TUNE_MAX_TFLOPS)
                rc = ft__fail(err, FT_ERR_CORRUPT, "%s=%.6g ms is %.6g TFLOP/s on the shape (at most %g)", what, x,
                              tflops, FT_TUNE_MAX_TFLOPS);
            r.ms[i * rounds + k] = x;
            v = end + 1;
        }
    }
    if (rc != FT_OK)
        return rc;
    snprintf(r.detail, sizeof r.detail, "%s", f.rest);
    *out = r;
    return FT_OK;
}
