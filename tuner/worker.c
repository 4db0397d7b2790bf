/*
 * The tuner's worker: one process per GPU that verifies and times kernels for the parent
 * (tuner/tune.c) over a line protocol on stdin/stdout. The GPU work lives here so that a
 * kernel which faults (an illegal address poisons the CUDA context for good) or hangs takes
 * only this process down; the parent records the fault and starts a new worker.
 *
 *   worker -> parent   ready count=N cc=90 sms=132 smem_block=.. smem_sm=.. regs_sm=..
 *                            regs_block=.. threads_block=.. threads_sm=.. l2=.. driver=13000 name=<name>
 *                      (or, when it cannot start: error <message>)
 *   parent -> worker   shape id=N op=fwd|bwd b=.. hq=.. hkv=.. sq=.. sk=.. d=.. causal=0|1 bf16=0|1
 *                            det=0|1 seed=..
 *                      (the operation's inputs and reference: the forward's, or the backward's
 *                       with the reference forward's O and LSE; on a large shape the reference is
 *                       of a part of it, ft__worker_verify_part, and the whole is only timed)
 *   worker -> parent   ok id=N  |  error id=N <message>
 *   parent -> worker   measure id=N key=<sha256 hex> family=<name> entry=<name> threads=.. rows=.. smem=..
 *                            verify=0|1 budget=<ms> tma_kv=.. span=.. persistent=0|1 pair=0|1 split=0|1 pack=0|1 keys=..
 *                            gqa_atomic=0|1 det=0|1 [counter=0|1] [tma_o=0|1]
 *                      (counter: facts.block_counter, tma_o: facts.tma_o; 0 where absent, as in lines
 *                       written before them)
 *                      (the kernel's family, which must compute the shape's operation, and its launch
 *                       facts, from the family: ft__family_launch)
 *   worker -> parent   result id=N status=<ok|wrong_result|launch_failure|fault|error> median=.. q1=..
 *                            q3=.. reps=.. l2=.. lse=.. regs=.. local=.. verify_ms=.. time_ms=.. detail=<text>
 *                      (l2: the relative L2 error of O, or the largest of dQ's, dK's and dV's; lse: the
 *                       LSE's largest error, 0 for the backward)
 *   parent -> worker   race id=N n=K rounds=R budget=<ms> ; <kernel 1's fields> ; ... ; <kernel K's fields>
 *                      (K kernels, each named by the fields of a measure command after its id, all
 *                       verified on the shape before; they are timed against each other, R rounds)
 *   worker -> parent   raced id=N status=<ok|launch_failure|fault|error> time_ms=.. ms0=a,b,.. ms1=.. detail=<text>
 *                      (ms<i>: kernel i's median in each round, on an ok race only)
 *   parent -> worker   quit
 * One line per command and answer, single spaces, no control characters, under 8 KiB; every answer
 * repeats its command's id (the parent, tuner/tune.c, checks every field and treats anything else
 * as a broken worker). After a fault the worker answers and exits with status 3. It refuses what
 * it cannot trust: a shape that ft__tune_check_shape rejects, a malformed command. It dies with
 * the parent (PR_SET_PDEATHSIG), so a killed tuner leaves no worker behind on a hung kernel.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "common/fs.h"
#include "generator/family.h"
#include "runtime/timing.h"
#include "runtime/session.h"
#include "tuner/tune.h"

/* The value of " name=" in a command: its text up to the next space (at most cap - 1 bytes;
 * longer is refused). 0 when absent, given twice or too long. */
static int field_str(const char *line, const char *name, char *out, size_t cap)
{
    char key[40];
    const char *p;
    size_t n;
    snprintf(key, sizeof key, " %s=", name);
    p = strstr(line, key);
    if (p == NULL || strstr(p + 1, key) != NULL)
        return 0;
    p += strlen(key);
    n = strcspn(p, " \n");
    if (n == 0 || n >= cap)
        return 0;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

/* An integer field, whole and within [lo, hi]. */
static int field_int(const char *line, const char *name, long long lo, long long hi, long long *out)
{
    char text[32], *end;
    long long v;

    if (!field_str(line, name, text, sizeof text))
        return 0;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* The command's id (its first field), or 0. */
static unsigned long long command_id(const char *line)
{
    const char *sp = strchr(line, ' ');
    long long id = 0;
    char first[40];
    size_t n;

    if (sp == NULL || strncmp(sp, " id=", 4) != 0)
        return 0;
    n = strcspn(sp + 1, " \n");
    if (n >= sizeof first)
        return 0;
    memcpy(first, sp, n + 1);
    first[n + 1] = '\0';
    return field_int(first, "id", 1, LLONG_MAX, &id) ? (unsigned long long)id : 0;
}

static int hex_key(const char *hex, uint8_t key[32])
{
    int i;

    if (strlen(hex) != 64 || strspn(hex, "0123456789abcdefABCDEF") != 64)
        return 0;
    for (i = 0; i < 32; i++) {
        char byte[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
        key[i] = (uint8_t)strtoul(byte, NULL, 16);
    }
    return 1;
}

/* A CUDA error from running a kernel leaves the context unusable. */
static int is_fault(const ft_err *err)
{
    return err->code == FT_ERR_CUDA &&
           (strstr(err->msg, "running the kernel") != NULL || strstr(err->msg, "ILLEGAL") != NULL ||
            strstr(err->msg, "LAUNCH_FAILED") != NULL || strstr(err->msg, "MISALIGNED") != NULL ||
            strstr(err->msg, "LAUNCH_TIMEOUT") != NULL);
}

/* A message made fit for a protocol line: control characters become spaces. */
static void one_line(char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
            *s = ' ';
}

/* Reads one command line; a longer one than fits is read to its end and refused (*too_long). */
static int read_command(char *line, size_t cap, int *too_long)
{
    size_t n;

    *too_long = 0;
    if (fgets(line, (int)cap, stdin) == NULL)
        return 0;
    n = strlen(line);
    if (n > 0 && line[n - 1] == '\n')
        return 1;
    if (feof(stdin))
        return 1;
    *too_long = 1;
    for (;;) {
        int c = getchar();
        if (c == EOF || c == '\n')
            break;
    }
    return 1;
}

ft_status ft__worker_parse_shape(const char *line, const ft_op **op, ft_problem *p, uint64_t *seed, ft_err *err)
{
    static const char *const names[] = {"b", "hq", "hkv", "sq", "sk", "d", "causal", "bf16", "det", "seed"};
    static const long long hi[] = {INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, 1, 1, 1, LLONG_MAX};
    long long v[10] = {0};
    char name[16];
    int i;

    memset(p, 0, sizeof *p);
    *seed = 0;
    *op = NULL;
    if (!field_str(line, "op", name, sizeof name) || (*op = ft__op_find(name)) == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "malformed shape command: op must be fwd or bwd");
    for (i = 0; i < 10; i++)
        if (!field_int(line, names[i], i < 6 ? 1 : 0, hi[i], &v[i]))
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                            "malformed shape command: %s must be %s", names[i],
                            i < 6 ? "a positive integer" : i < 9 ? "0 or 1" : "a non-negative integer");
    p->batch = (int)v[0], p->heads_q = (int)v[1], p->heads_kv = (int)v[2], p->seqlen_q = (int)v[3];
    p->seqlen_k = (int)v[4], p->head_dim = (int)v[5], p->causal = (int)v[6], p->bf16 = (int)v[7];
    p->deterministic = (int)v[8];
    *seed = (uint64_t)v[9];
    if (*op == &ft__op_fwd && p->deterministic)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "malformed shape command: det=1 for the forward, which is "
                        "always deterministic");
    if (ft__tune_check_shape(p, err) != FT_OK) {
        ft__err_prefix(err, "invalid shape");
        return FT_ERR_INVALID_ARGUMENT;
    }
    return FT_OK;
}

/* When this long passed between the end of the last timing and a measure command (a shape set
 * up, the parent busy), the timing first heats the GPU for FT_HEAT_MS (runtime/timing.h: the
 * clock an idle H200 starts at is not the one it times at); back-to-back measurements keep it
 * heated. */
#define IDLE_MS 50.0

/* When the last timing ended (ms on the monotonic clock). */
static double last_timing_end = -1e300;

/* The fp32 reference reads every key for every query row of every head: on the tuner's largest
 * shapes it took seconds a bucket (the forward's 16k-token grid at d = 64: 5-7 s, the
 * backward's more; H200, 2026-12-05), longer than the bucket's measurements. A shape whose
 * reference would see more than VERIFY_SCORES scores is verified on a part of it (verify_part)
 * and timed on the whole. */
#define VERIFY_SCORES (1LL << 26)

/* The part of problem p that its kernels are verified on: as many sequences and K/V heads (with
 * their query heads) as keep the reference within VERIFY_SCORES scores, two of each at most and
 * one of each at least; the same sequence lengths, head dim, causality, grouping, dtype and
 * layout. Returns 0 when that is the whole problem. */
int ft__worker_verify_part(const ft_problem *p, ft_problem *part)
{
    const long long group = p->heads_q / p->heads_kv;
    const long long per_slice = (long long)p->seqlen_q * p->seqlen_k * group;
    long long fit = per_slice > 0 ? VERIFY_SCORES / per_slice : 1;

    *part = *p;
    if (per_slice * p->batch * p->heads_kv <= VERIFY_SCORES)
        return 0;
    fit = fit < 1 ? 1 : fit;
    part->heads_kv = p->heads_kv < 2 || fit < 2 ? 1 : 2;
    part->batch = p->batch < 2 || fit < 2 * part->heads_kv ? 1 : 2;
    part->heads_q = part->heads_kv * (int)group;
    return 1;
}

/* The current shape: its inputs for timing, and the reference its kernels are verified against
 * (on those inputs, or on a part of the problem's: ft__worker_verify_part). */
typedef struct shape_state {
    const ft_op *op; /* NULL: none set up */
    int part;        /* verified on fwd_part or bwd_part */
    ft_tensors fwd, fwd_part;
    ft_bwd_tensors bwd, bwd_part;
} shape_state;

static void shape_free(ft_session *s, shape_state *st)
{
    if (st->op == &ft__op_fwd) {
        ft__tensors_destroy(s->cu, &st->fwd);
        if (st->part)
            ft__tensors_destroy(s->cu, &st->fwd_part);
    } else if (st->op == &ft__op_bwd) {
        ft__bwd_tensors_destroy(s->cu, &st->bwd);
        if (st->part)
            ft__bwd_tensors_destroy(s->cu, &st->bwd_part);
    }
    st->op = NULL;
    st->part = 0;
}

/* Inputs of the backward's problem p in t: with the reference when check, else for timing. */
static ft_status bwd_inputs(ft_session *s, const ft_problem *p, uint64_t seed, int check, ft_bwd_tensors *t,
                            ft_err *err)
{
    ft_status rc = ft__bwd_tensors_create(s->cu, p, t, err);
    if (rc == FT_OK && (rc = check ? ft__bwd_tensors_prepare(&s->verifier, t, seed, 1.f, err)
                                   : ft__bwd_tensors_fill_timing(&s->verifier, t, seed, 1.f, err)) != FT_OK)
        ft__bwd_tensors_destroy(s->cu, t);
    return rc;
}

/* Likewise of the forward's. */
static ft_status fwd_inputs(ft_session *s, const ft_problem *p, uint64_t seed, int check, ft_tensors *t,
                            ft_err *err)
{
    ft_status rc = ft__tensors_create(s->cu, p, t, err);
    if (rc == FT_OK && ((rc = ft__tensors_fill(&s->verifier, t, seed, 1.f, err)) != FT_OK ||
                        (check && (rc = ft__tensors_reference(&s->verifier, t, err)) != FT_OK)))
        ft__tensors_destroy(s->cu, t);
    if (rc == FT_OK && !check)
        rc = ft__cuda_check(s->cu, s->cu->p_cuCtxSynchronize(), err, "filling the inputs");
    return rc;
}

/* Sets up the inputs and the reference of a shape command; replies ok or error. */
static void do_shape(ft_session *s, const char *line, unsigned long long id, shape_state *st)
{
    const ft_op *op;
    ft_problem p;
    uint64_t seed;
    ft_status rc;
    ft_err err;

    shape_free(s, st);
    rc = ft__worker_parse_shape(line, &op, &p, &seed, &err);
    if (rc == FT_OK) {
        ft_problem part;
        const int split = ft__worker_verify_part(&p, &part);
        if (op == &ft__op_bwd) {
            rc = bwd_inputs(s, &p, seed, !split, &st->bwd, &err);
            if (rc == FT_OK && split && (rc = bwd_inputs(s, &part, seed, 1, &st->bwd_part, &err)) != FT_OK)
                ft__bwd_tensors_destroy(s->cu, &st->bwd);
        } else {
            rc = fwd_inputs(s, &p, seed, !split, &st->fwd, &err);
            if (rc == FT_OK && split && (rc = fwd_inputs(s, &part, seed, 1, &st->fwd_part, &err)) != FT_OK)
                ft__tensors_destroy(s->cu, &st->fwd);
        }
        st->part = rc == FT_OK && split;
    }
    if (rc != FT_OK) {
        one_line(err.msg);
        printf("error id=%llu %s\n", id, err.msg);
    } else {
        st->op = op;
        printf("ok id=%llu\n", id);
    }
    fflush(stdout);
}

/* Verifies a loaded kernel on the current shape: pass or not, the worst relative L2 error (of O,
 * or of dQ, dK and dV) and the LSE's error, the first failure in detail. */
static ft_status verify(ft_session *s, const ft_kernel *k, shape_state *st, int *pass, double *l2, double *lse,
                        char *detail, size_t cap, ft_err *err)
{
    ft_status rc;
    int i;

    if (st->op == &ft__op_bwd) {
        ft_bwd_check c;
        memset(&c, 0, sizeof c);
        rc = ft__verify_bwd_kernel(&s->verifier, k, st->part ? &st->bwd_part : &st->bwd, &c, err);
        *pass = c.pass, *lse = 0, *l2 = 0;
        for (i = 0; i < 3; i++)
            *l2 = c.rel_l2[i] > *l2 || isnan(c.rel_l2[i]) ? c.rel_l2[i] : *l2;
        snprintf(detail, cap, "%s", c.detail);
    } else {
        ft_check c;
        memset(&c, 0, sizeof c);
        rc = ft__verify_kernel_gpu(&s->verifier, k, st->part ? &st->fwd_part : &st->fwd, &c, err);
        *pass = c.pass, *l2 = c.o_rel_l2, *lse = c.lse_max_err;
        snprintf(detail, cap, "%s", c.detail);
    }
    if (rc == FT_OK && !*pass && st->part) { /* say which part of the shape failed */
        const ft_problem *p = st->op == &ft__op_bwd ? &st->bwd_part.problem : &st->fwd_part.problem;
        const size_t used = strlen(detail);
        snprintf(detail + used, cap - used, " (verified on b=%d,hq=%d,hkv=%d of the shape)", p->batch, p->heads_q,
                 p->heads_kv);
    }
    return rc;
}

/* A forward verified on a part of the shape is timed on the whole with its LSE poisoned (NaN)
 * first and checked after: a row that no launch of the whole grid writes, or a NaN, still
 * fails (the sum of the squares is NaN; a row that sees no key is +inf, not NaN). */
static ft_status lse_poison(ft_session *s, shape_state *st, ft_err *err)
{
    const ft_problem *p = &st->fwd.problem;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    return ft__cuda_check(s->cu, s->cu->p_cuMemsetD32(st->fwd.lse, 0xffffffffu, rows), err, "poisoning the LSE");
}

static ft_status lse_written(ft_session *s, shape_state *st, int *ok, ft_err *err)
{
    const ft_problem *p = &st->fwd.problem;
    double sum = 0;
    ft_status rc = ft__verify_sumsq(&s->verifier, st->fwd.lse, (size_t)p->batch * p->heads_q * p->seqlen_q,
                                    st->fwd.stats, &sum, err);
    *ok = !isnan(sum);
    return rc;
}

/* A loaded kernel's launch on the current shape, for the timing. */
typedef struct launch {
    ft_fwd_launch fwd;
    ft_bwd_launch bwd;
} launch;

/* Prepares k's launch on the current shape into l (the workspace grown to what k needs: a
 * kernel prepared before with a smaller one must be prepared again), with the function that
 * runs it and its argument. */
static ft_status prepare_launch(ft_session *s, const ft_kernel *k, shape_state *st, launch *l, ft_launch_fn *fn,
                                void **ud, ft_err *err)
{
    ft_status rc;

    if (st->op == &ft__op_bwd) {
        rc = ft__bwd_tensors_launch(s->cu, k, &st->bwd, &l->bwd, err);
        *fn = ft__bwd_launch_fn, *ud = &l->bwd;
    } else {
        rc = ft__tensors_workspace(s->cu, &st->fwd, k, err);
        l->fwd.cu = s->cu, l->fwd.k = k;
        ft__tensors_params(&st->fwd, &l->fwd.params);
        *fn = ft__fwd_launch_fn, *ud = &l->fwd;
    }
    return rc;
}

/* Times a loaded kernel on the current shape. */
static ft_status time_kernel(ft_session *s, const ft_kernel *k, shape_state *st, const ft_timing_opts *o,
                             ft_timing *out, ft_err *err)
{
    launch l;
    ft_launch_fn fn;
    void *ud;
    ft_status rc = prepare_launch(s, k, st, &l, &fn, &ud, err);

    return rc != FT_OK ? rc : ft__time(s->cu, fn, ud, o, out, err);
}

/* A kernel as a measure or race command names it: its compile-cache key, family, entry and launch
 * facts (the head dim and causality come with the shape). */
typedef struct kernel_cmd {
    uint8_t key[32];
    char entry[FT_ENTRY_MAX];
    const ft_family *fam;
    ft_launch_facts facts;
    long long verify, budget;
} kernel_cmd;

/* Parses a kernel's fields from text (a measure command, or one kernel's part of a race's);
 * NULL when they are good, else why not. */
static const char *parse_kernel(const char *text, const shape_state *st, kernel_cmd *kc)
{
    char hex[80], family[64];
    long long threads = 0, rows = 0, smem = 0, tma_kv = 0, span = 0, persistent = 0, pair = 0;
    long long keys = 0, gqa_atomic = 0, det = 0, split = 0, pack = 0, packed = 0, counter = 0, tma_o = 0;

    memset(kc, 0, sizeof *kc);
    if (!field_str(text, "key", hex, sizeof hex) || !hex_key(hex, kc->key) ||
        !field_str(text, "family", family, sizeof family) || (kc->fam = ft__family_find(family)) == NULL ||
        !field_str(text, "entry", kc->entry, sizeof kc->entry) || !field_int(text, "threads", 1, 1 << 20, &threads) ||
        !field_int(text, "rows", 1, 1 << 20, &rows) || !field_int(text, "smem", 0, 1LL << 32, &smem) ||
        !field_int(text, "verify", 0, 1, &kc->verify) || !field_int(text, "budget", 1, 1000000, &kc->budget) ||
        !field_int(text, "tma_kv", 0, 1 << 20, &tma_kv) || !field_int(text, "span", 0, 64, &span) ||
        !field_int(text, "persistent", 0, 1, &persistent) || !field_int(text, "pair", 0, 1, &pair) ||
        !field_int(text, "split", 0, 1, &split) || !field_int(text, "pack", 0, 1, &pack) ||
        !field_int(text, "packed", 0, 1, &packed) || !field_int(text, "keys", 0, 1 << 20, &keys) ||
        !field_int(text, "gqa_atomic", 0, 1, &gqa_atomic) || !field_int(text, "det", 0, 1, &det) ||
        (strstr(text, " counter=") != NULL && !field_int(text, "counter", 0, 1, &counter)) ||
        (strstr(text, " tma_o=") != NULL && !field_int(text, "tma_o", 0, 1, &tma_o)))
        return st->op == NULL ? "no shape set up" : "a malformed kernel";
    if (st->op == NULL)
        return "no shape set up";
    if (kc->fam->op != st->op)
        return "the kernel's family computes another operation than the shape's";
    one_line(kc->entry);
    kc->facts.threads = (int)threads, kc->facts.smem_dynamic = smem, kc->facts.rows_per_block = (int)rows;
    kc->facts.head_dim = st->op == &ft__op_bwd ? st->bwd.problem.head_dim : st->fwd.problem.head_dim;
    kc->facts.tma = tma_kv > 0, kc->facts.tma_rows_kv = (int)tma_kv, kc->facts.tma_span = (int)span;
    kc->facts.persistent = (int)persistent, kc->facts.pair_blocks = (int)pair, kc->facts.block_counter = (int)counter;
    kc->facts.tma_o = kc->facts.tma && tma_o;
    kc->facts.keys_per_block = (int)keys, kc->facts.gqa_atomic = (int)gqa_atomic, kc->facts.deterministic = (int)det;
    kc->facts.split_kv = (int)split, kc->facts.pack_gqa = (int)pack, kc->facts.packed = (int)packed;
    return NULL;
}

/* Loads kc's kernel from the compile cache into k: "error" when the cache lacks it,
 * "launch_failure" when it does not load, NULL when loaded. */
static const char *load_kernel(ft_session *s, const kernel_cmd *kc, ft_kernel *k, ft_err *err)
{
    ft_compiled c;
    const char *status = NULL;

    memset(&c, 0, sizeof c);
    memset(k, 0, sizeof *k);
    if (!ft__cache_get(s->cache, kc->key, &c)) {
        snprintf(err->msg, sizeof err->msg, "kernel %s is not in the compile cache", kc->entry);
        status = "error";
    } else if (ft__kernel_load_family(s->cu, kc->fam, c.cubin, kc->entry, &kc->facts, &s->arch, k, err) != FT_OK) {
        status = "launch_failure";
    }
    ft__compiled_free(&c);
    return status;
}

/* Verifies and times one kernel of a measure command; replies with a result line. Returns 1
 * after a fault (the context is gone). */
static int do_measure(ft_session *s, const char *line, unsigned long long id, shape_state *st)
{
    char detail[256] = "";
    kernel_cmd kc;
    ft_kernel k;
    ft_timing timing;
    ft_timing_opts o;
    ft_err err;
    double t0, t1, t2, l2 = 0, lse = 0;
    int pass = 0, loaded = 0;
    const char *status = "ok";

    memset(&timing, 0, sizeof timing);
    memset(&k, 0, sizeof k);
    err.msg[0] = '\0';
    if ((status = parse_kernel(line, st, &kc)) != NULL) {
        printf("result id=%llu status=error median=0 q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 local=0 verify_ms=0 "
               "time_ms=0 detail=%s\n", id, status);
        fflush(stdout);
        return 0;
    }
    t0 = ft__now_ms();
    t1 = t2 = t0;
    if ((status = load_kernel(s, &kc, &k, &err)) == NULL) {
        status = "ok";
        loaded = 1;
        if (kc.verify && verify(s, &k, st, &pass, &l2, &lse, detail, sizeof detail, &err) != FT_OK) {
            status = is_fault(&err) ? "fault" : "launch_failure";
        } else if (kc.verify && !pass) {
            status = "wrong_result";
            snprintf(err.msg, sizeof err.msg, "%s", detail);
        } else {
            t1 = ft__now_ms();
            ft__timing_opts_default(&o);
            o.warmup_ms = (double)kc.budget / 6.0;
            /* a check (a leader verified on a neighbour: its time unused) needs no heat */
            o.heat_ms = t0 - last_timing_end > IDLE_MS && kc.budget > FT_TUNE_CHECK_MS ? FT_HEAT_MS : 0;
            o.budget_ms = (double)kc.budget;
            o.min_reps = 5;
            o.max_reps = 100;
            const int whole = st->part && st->op == &ft__op_fwd && kc.verify;
            int written = 1;
            if ((whole && lse_poison(s, st, &err) != FT_OK) || time_kernel(s, &k, st, &o, &timing, &err) != FT_OK ||
                (whole && lse_written(s, st, &written, &err) != FT_OK))
                status = is_fault(&err) || err.code == FT_ERR_CUDA ? "fault" : "launch_failure";
            else if (!written) {
                status = "wrong_result";
                snprintf(err.msg, sizeof err.msg, "the whole shape's LSE holds NaN after the timing (a row unwritten, or "
                         "a NaN), though the part it was verified on passed");
            }
            t2 = last_timing_end = ft__now_ms();
        }
    }
    if (t1 == t0)
        t1 = t2 = ft__now_ms();
    if (loaded)
        ft__kernel_unload(s->cu, &k);
    one_line(err.msg);
    /* a verification that did not run leaves no error to report */
    if (!kc.verify || strcmp(status, "launch_failure") == 0 || strcmp(status, "fault") == 0 ||
        strcmp(status, "error") == 0)
        l2 = lse = 0;
    printf("result id=%llu status=%s median=%.9g q1=%.9g q3=%.9g reps=%d l2=%.9g lse=%.9g regs=%d local=%d "
           "verify_ms=%.3f time_ms=%.3f detail=%s\n",
           id, status, timing.median_ms, timing.q1_ms, timing.q3_ms, timing.reps, l2, lse, k.registers,
           k.local_bytes, t1 - t0, t2 - t1, strcmp(status, "ok") == 0 ? "" : err.msg);
    fflush(stdout);
    return strcmp(status, "fault") == 0;
}

/* Times the kernels of a race command against each other (ft__time_race, heated first) and
 * replies with a raced line: each kernel's median per round. Its kernels were verified on the
 * shape before; nothing is verified here. Returns 1 after a fault (the context is gone). */
_Static_assert(FT_TUNE_RACE_KERNELS <= FT_RACE_MAX, "a race command's kernels all race at once");

static int do_race(ft_session *s, const char *line, unsigned long long id, shape_state *st)
{
    static ft_kernel k[FT_TUNE_RACE_KERNELS];
    static launch l[FT_TUNE_RACE_KERNELS];
    static ft_timing out[FT_TUNE_RACE_KERNELS * FT_TUNE_RACE_ROUNDS];
    ft_launch_fn fn[FT_TUNE_RACE_KERNELS];
    void *ud[FT_TUNE_RACE_KERNELS];
    kernel_cmd kc;
    ft_timing_opts o;
    ft_err err;
    long long n = 0, rounds = 0, budget = 0;
    const char *status = NULL, *part = strstr(line, " ; ");
    char text[1024];
    const double t0 = ft__now_ms();
    int i, r, loaded = 0, pass;

    err.msg[0] = '\0';
    /* "race id=N n=K rounds=R budget=B", then K parts " ; <a measure command's kernel fields>" */
    if (part == NULL || (size_t)(part - line) >= sizeof text)
        status = "a malformed race";
    else {
        memcpy(text, line, (size_t)(part - line));
        text[part - line] = '\0';
        if (!field_int(text, "n", 1, FT_TUNE_RACE_KERNELS, &n) ||
            !field_int(text, "rounds", 1, FT_TUNE_RACE_ROUNDS, &rounds) || !field_int(text, "budget", 1, 1000000, &budget))
            status = "a malformed race";
    }
    for (i = 0; status == NULL && i < n; i++, part = strstr(part + 3, " ; ")) {
        const char *next = strstr(part + 3, " ; ");
        const size_t len = next != NULL ? (size_t)(next - part) : strlen(part);
        if ((next == NULL) != (i == n - 1) || len >= sizeof text) {
            status = "a malformed race";
            break;
        }
        memcpy(text, part + 2, len - 2); /* from the space before the kernel's first field */
        text[len - 2] = '\0';
        if ((status = parse_kernel(text, st, &kc)) == NULL && (status = load_kernel(s, &kc, &k[i], &err)) == NULL)
            loaded++;
    }
    if (status != NULL && err.msg[0] == '\0')
        snprintf(err.msg, sizeof err.msg, "%s", status);
    if (status != NULL && strcmp(status, "launch_failure") != 0)
        status = "error";
    /* twice over: a kernel's workspace may outgrow the one an earlier kernel was prepared with */
    for (pass = 0; pass < 2 && status == NULL; pass++)
        for (i = 0; i < n && status == NULL; i++)
            if (prepare_launch(s, &k[i], st, &l[i], &fn[i], &ud[i], &err) != FT_OK)
                status = "launch_failure";
    if (status == NULL) {
        ft__timing_opts_default(&o);
        o.warmup_ms = (double)budget / 6.0 * (double)n;
        /* right after the bucket's measurements the board is warm: a shorter heat settles it */
        o.heat_ms = t0 - last_timing_end > IDLE_MS ? FT_HEAT_MS : FT_RACE_HEAT_MS;
        o.budget_ms = (double)budget;
        o.min_reps = 5;
        o.max_reps = 100;
        if (ft__time_race(s->cu, (int)n, fn, ud, &o, (int)rounds, out, &err) != FT_OK)
            status = is_fault(&err) || err.code == FT_ERR_CUDA ? "fault" : "launch_failure";
        last_timing_end = ft__now_ms();
    }
    for (i = 0; i < loaded; i++)
        ft__kernel_unload(s->cu, &k[i]);
    one_line(err.msg);
    printf("raced id=%llu status=%s time_ms=%.3f", id, status != NULL ? status : "ok", ft__now_ms() - t0);
    for (i = 0; status == NULL && i < n; i++)
        for (r = 0; r < rounds; r++) {
            if (r == 0)
                printf(" ms%d=", i);
            printf(r == 0 ? "%.9g" : ",%.9g", out[i * rounds + r].median_ms);
        }
    printf(" detail=%s\n", status == NULL ? "" : err.msg);
    fflush(stdout);
    return status != NULL && strcmp(status, "fault") == 0;
}

int ft__worker_main(int device, const char *cache_dir)
{
    ft_session s;
    shape_state st;
    ft_err err;
    char line[8192];
    int count = 0, too_long = 0, rc = 0;

#ifdef __linux__
    /* die with the tuner: a worker stuck in a hung kernel must not outlive it */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    memset(&st, 0, sizeof st);
    if (ft__session_open(device, cache_dir, 1, &s, &err) != FT_OK) {
        one_line(err.msg);
        printf("error %s\n", err.msg);
        fflush(stdout);
        return 2;
    }
    if (s.cache == NULL) {
        printf("error the worker needs the compile cache\n");
        fflush(stdout);
        ft__session_close(&s);
        return 2;
    }
    s.cu->p_cuDeviceGetCount(&count);
    {
        CUdevice dev;
        int l2 = 0;
        s.cu->p_cuDeviceGet(&dev, device);
        s.cu->p_cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
        one_line(s.arch.device_name);
        printf("ready count=%d cc=%d sms=%d smem_block=%lld smem_sm=%lld regs_sm=%d regs_block=%d threads_block=%d "
               "threads_sm=%d l2=%d driver=%d name=%s\n",
               count, s.arch.cc, s.arch.sms, s.arch.smem_per_block, s.arch.smem_per_sm, s.arch.regs_per_sm,
               s.arch.regs_per_block, s.arch.threads_per_block, s.arch.threads_per_sm, l2, s.cu->driver_version,
               s.arch.device_name);
        fflush(stdout);
    }
    while (read_command(line, sizeof line, &too_long)) {
        unsigned long long id = command_id(line);
        if (too_long) {
            printf("error id=%llu a command longer than %zu bytes\n", id, sizeof line - 2);
        } else if (strcmp(line, "quit\n") == 0 || strcmp(line, "quit") == 0) {
            break;
        } else if (id == 0) {
            printf("error id=0 a command without an id\n");
        } else if (strncmp(line, "shape ", 6) == 0) {
            do_shape(&s, line, id, &st);
            continue;
        } else if (strncmp(line, "measure ", 8) == 0 || strncmp(line, "race ", 5) == 0) {
            if ((line[0] == 'm' ? do_measure : do_race)(&s, line, id, &st)) {
                rc = 3; /* the context is gone: let the parent start a new worker */
                break;
            }
            continue;
        } else {
            printf("error id=%llu unknown command\n", id);
        }
        fflush(stdout);
    }
    if (rc != 3) {
        shape_free(&s, &st);
        ft__session_close(&s);
    }
    return rc;
}
