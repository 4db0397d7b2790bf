/*
 * ft_overhead: what the runtime dispatcher costs on the host, and what a first call costs.
 *
 *   ft_overhead [--json PATH] [--launches N] [--rounds R] [--batch B] [--device N]
 *               [--spec SPEC] [--variant V] [--b B] [--h H] [--s S] [--d D]
 *
 * Host overhead: one context runs one small problem (default b=1, h=1, s=128, d=64, fp16),
 * and the same kernel (the same variant, compiled from the same source) is launched two
 * ways with the same arguments on the same stream: through ft_attention_forward (the shared
 * library, as an application calls it) and with a bare cuLaunchKernel. Each round enqueues N
 * launches of each, in batches of B that are timed with clock_gettime and separated by an
 * untimed stream synchronization, so that the launch queue never fills and the GPU's own time
 * never shows. The figure is host time per call, the median of R rounds.
 *
 * Cold start: the time of the first ft_attention_forward of a new context (it builds the
 * call's kernel) when the kernel
 *   - comes from a tuning database's stored cubin (module load only; no compile cache),
 *   - comes from the compile cache (generate the source, hash it, read the cubin, load),
 *   - must be compiled with NVRTC (an empty compile cache).
 *
 * The bare launch uses flashtune's internal layer (linked from ft_core) to compile and load
 * the kernel, and calls cuLaunchKernel through the same dlopen'ed driver as the library, so
 * the program starts (and says so cleanly) on a machine without the CUDA driver. Exit status:
 * 0 measured, 77 no driver or no GPU, 1 anything else.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flashtune.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/sha256.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "runtime/compile.h"
#include "runtime/driver.h"
#include "runtime/kernel.h"
#include "runtime/session.h"
#include "tuning_db/db.h"

#define MAX_ROUNDS 101
#define OVERHEAD_BAR_US 2.0

typedef struct bench_opts {
    const char *json;
    const char *spec;
    const char *variant; /* without d, causal, dtype */
    long launches, rounds, batch;
    int device;
    int b, h, s, d;
} bench_opts;

typedef struct cold_start {
    double create_ms; /* ft_context_create */
    double first_ms;  /* the first ft_attention_forward (host time) */
    int ok;
    char error[256];
} cold_start;

typedef struct problem {
    ft_attention_args args;
    ft_fwd_params params;
    CUdeviceptr q, k, v, o;
    CUstream stream;
} problem;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The scratch directory: caches and the database. */
static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char usage[] =
    "usage: ft_overhead [options]\n"
    "  --json PATH      also write the results as JSON\n"
    "  --launches N     launches per round and way (default 10000)\n"
    "  --rounds R       rounds; the median is reported (default 7)\n"
    "  --batch B        launches per timed batch, between synchronizations (default 256)\n"
    "  --device N       GPU ordinal (default 0)\n"
    "  --spec SPEC      the spec of the kernel (default specs/flash_fwd.lua, else the built-in one)\n"
    "  --variant V      its variant without d, causal and dtype\n"
    "                   (default bm=128,bn=128,warps=4,stages=1,qreg=0,overlap=0)\n"
    "  --b B --h H --s S --d D   the problem (default 1 1 128 64; fp16, not causal)\n";

static int parse_long(const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "ft_overhead: %s takes an integer from %ld to %ld, not '%s'\n", opt, lo, hi, text);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longopts[] = {
        {"json", required_argument, NULL, 'J'},   {"launches", required_argument, NULL, 'n'},
        {"rounds", required_argument, NULL, 'r'}, {"batch", required_argument, NULL, 'B'},
        {"device", required_argument, NULL, 'D'}, {"spec", required_argument, NULL, 'S'},
        {"variant", required_argument, NULL, 'V'}, {"b", required_argument, NULL, 'b'},
        {"h", required_argument, NULL, 'h'},      {"s", required_argument, NULL, 's'},
        {"d", required_argument, NULL, 'd'},      {"help", no_argument, NULL, 'H'},
        {NULL, 0, NULL, 0}};
    long v;
    int ch;

    memset(o, 0, sizeof *o);
    o->spec = "specs/flash_fwd.lua";
    o->variant = "bm=128,bn=128,warps=4,stages=1,qreg=0,overlap=0";
    o->launches = 10000, o->rounds = 7, o->batch = 256;
    o->b = 1, o->h = 1, o->s = 128, o->d = 64;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'J': o->json = optarg; break;
        case 'S': o->spec = optarg; break;
        case 'V': o->variant = optarg; break;
        case 'n': if (!parse_long("--launches", optarg, 1, 100000000, &o->launches)) return 2; break;
        case 'r': if (!parse_long("--rounds", optarg, 1, MAX_ROUNDS, &o->rounds)) return 2; break;
        case 'B': if (!parse_long("--batch", optarg, 1, 100000, &o->batch)) return 2; break;
        case 'D': if (!parse_long("--device", optarg, 0, 63, &v)) return 2; o->device = (int)v; break;
        case 'b': if (!parse_long("--b", optarg, 1, 65535, &v)) return 2; o->b = (int)v; break;
        case 'h': if (!parse_long("--h", optarg, 1, 65535, &v)) return 2; o->h = (int)v; break;
        case 's': if (!parse_long("--s", optarg, 1, 1 << 20, &v)) return 2; o->s = (int)v; break;
        case 'd': if (!parse_long("--d", optarg, 8, 512, &v)) return 2; o->d = (int)v; break;
        case 'H': fputs(usage, stdout); return 1;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ft_overhead: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

/* Device tensors [b, s, h, d] fp16 (zeros), the call's arguments and the kernel's. */
static ft_status problem_setup(const ft_cuda *cu, const bench_opts *o, problem *p, ft_err *err)
{
    const size_t bytes = (size_t)o->b * o->s * o->h * o->d * 2;
    const int64_t st[3] = {(int64_t)o->s * o->h * o->d, (int64_t)o->h * o->d, o->d};
    CUdeviceptr *bufs[4] = {&p->q, &p->k, &p->v, &p->o};
    ft_attention_args *a = &p->args;
    ft_fwd_params *f = &p->params;
    ft_status rc = FT_OK;
    int i;

    memset(p, 0, sizeof *p);
    for (i = 0; i < 4 && rc == FT_OK; i++) {
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(bufs[i], bytes), err, "cuMemAlloc");
        if (rc == FT_OK)
            rc = ft__cuda_check(cu, cu->p_cuMemsetD8(*bufs[i], 0, bytes), err, "cuMemsetD8");
    }
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuStreamCreate(&p->stream, CU_STREAM_NON_BLOCKING), err, "cuStreamCreate");
    if (rc != FT_OK)
        return rc;
    ft_attention_args_init(a);
    a->dtype = FT_F16;
    a->batch = o->b, a->heads_q = o->h, a->heads_kv = o->h;
    a->seqlen_q = o->s, a->seqlen_k = o->s, a->head_dim = o->d;
    a->q = (const void *)(uintptr_t)p->q, a->k = (const void *)(uintptr_t)p->k;
    a->v = (const void *)(uintptr_t)p->v, a->o = (void *)(uintptr_t)p->o;
    for (i = 0; i < 3; i++)
        a->q_stride[i] = a->k_stride[i] = a->v_stride[i] = a->o_stride[i] = st[i];
    /* The kernel's argument block, as ft_attention_forward fills it. */
    memset(f, 0, sizeof *f);
    f->q = a->q, f->k = a->k, f->v = a->v, f->o = a->o, f->lse = NULL;
    f->q_batch_stride = f->k_batch_stride = f->v_batch_stride = f->o_batch_stride = st[0];
    f->q_row_stride = f->k_row_stride = f->v_row_stride = f->o_row_stride = st[1];
    f->q_head_stride = f->k_head_stride = f->v_head_stride = f->o_head_stride = st[2];
    f->batch = o->b, f->heads_q = o->h, f->heads_kv = o->h, f->seqlen_q = o->s, f->seqlen_k = o->s;
    f->scale = 1.0f / sqrtf((float)o->d);
    f->scale_log2 = f->scale * 1.4426950408889634f;
    return FT_OK;
}

static void problem_free(const ft_cuda *cu, problem *p)
{
    if (p->stream != NULL)
        cu->p_cuStreamDestroy(p->stream);
    if (p->q)
        cu->p_cuMemFree(p->q);
    if (p->k)
        cu->p_cuMemFree(p->k);
    if (p->v)
        cu->p_cuMemFree(p->v);
    if (p->o)
        cu->p_cuMemFree(p->o);
}

/* A new context with these options and the time of its first call. */
static void cold(const ft_context_options *opts, const problem *p, const ft_cuda *cu, cold_start *out)
{
    ft_context *ctx = NULL;
    ft_status st;
    double t0, t1, t2;

    memset(out, 0, sizeof *out);
    t0 = ft__now_ms();
    st = ft_context_create(opts, &ctx);
    t1 = ft__now_ms();
    if (st == FT_OK) {
        st = ft_attention_forward(ctx, &p->args, p->stream);
        t2 = ft__now_ms();
        if (st == FT_OK) {
            out->ok = 1;
            out->create_ms = t1 - t0;
            out->first_ms = t2 - t1;
        }
    }
    if (st != FT_OK)
        snprintf(out->error, sizeof out->error, "%s: %s", ft_status_name(st), ft_last_error(ctx));
    cu->p_cuStreamSynchronize(p->stream);
    ft_context_destroy(ctx);
}

/* A tuning database whose winner for the problem's bucket is the kernel, cubin stored. The
 * device row is this GPU's fingerprint as the library computes it. */
static ft_status make_database(const char *path, ft_session *s, ft_spec *spec, const ft_variant *v,
                               const bench_opts *o, ft_err *err)
{
    ft_kernel_source src;
    ft_compiled c;
    ft_db *db = NULL;
    ft_db_device dev;
    ft_db_kernel k;
    ft_db_result r;
    uint8_t digest[32];
    ft_status rc;
    char target[32];

    memset(&src, 0, sizeof src);
    memset(&c, 0, sizeof c);
    ft__family_target(ft__family_find(spec->template_name), &s->arch, target, sizeof target);
    rc = ft__emit(spec, ft__family_find(spec->template_name), v, &s->arch, &src, err);
    if (rc == FT_OK)
        rc = ft__compile(src.text, "overhead.cu", target, s->cache, &c, err);
    if (rc == FT_OK)
        rc = ft__db_open(path, 0, &db, err);
    if (rc != FT_OK)
        goto out;
    ft__session_fingerprint(s, &dev);
    memset(&k, 0, sizeof k);
    snprintf(k.family, sizeof k.family, "%s", spec->template_name);
    snprintf(k.variant, sizeof k.variant, "%s", src.variant);
    snprintf(k.arch, sizeof k.arch, "%s", target);
    snprintf(k.template_hash, sizeof k.template_hash, "%s", src.template_hash);
    ft__sha256(src.text, strlen(src.text), digest);
    ft__sha256_hex(digest, k.source_hash);
    snprintf(k.entry, sizeof k.entry, "%s", src.entry);
    k.source = src.text;
    k.cubin = c.cubin;
    k.cubin_size = c.cubin_size;
    k.registers = c.report.registers;
    k.smem_dynamic = src.smem_dynamic;
    k.threads = src.threads;
    k.compile_ms = c.compile_ms;
    memset(&r, 0, sizeof r);
    rc = ft__db_device_id(db, &dev, &r.device_id, err);
    if (rc == FT_OK)
        rc = ft__db_kernel_id(db, &k, &r.kernel_id, err);
    if (rc != FT_OK)
        goto out;
    ft__key_of(&ft__op_fwd, "f16", o->d, 0, 0, o->b, o->h, o->h, o->s, o->s, &r.key);
    r.batch = o->b, r.heads_q = o->h, r.heads_kv = o->h, r.seqlen_q = o->s, r.seqlen_k = o->s;
    r.status = FT_RESULT_OK;
    r.median_ms = 0.01;
    r.iqr_ms = 0;
    r.tflops = NAN;
    r.max_error = NAN;
    r.repetitions = 1;
    rc = ft__db_record(db, &r, err);
out:
    ft__db_close(db);
    ft__compiled_free(&c);
    ft__kernel_source_free(&src);
    return rc;
}

typedef struct way {
    const char *name;
    double us[MAX_ROUNDS]; /* host time per call, each round */
    double median_us;
} way;

/* One round of one way: launches in timed batches, synchronized in between (untimed).
 * Returns host microseconds per call, or -1 after printing why. */
static double round_dispatch(ft_context *ctx, const problem *p, const ft_cuda *cu, const bench_opts *o)
{
    double total = 0;
    long done = 0;

    while (done < o->launches) {
        long n = o->launches - done < o->batch ? o->launches - done : o->batch, i;
        double t0 = ft__now_ms();
        for (i = 0; i < n; i++) {
            ft_status st = ft_attention_forward(ctx, &p->args, p->stream);
            if (st != FT_OK) {
                fprintf(stderr, "ft_overhead: ft_attention_forward: %s: %s\n", ft_status_name(st), ft_last_error(ctx));
                return -1;
            }
        }
        total += ft__now_ms() - t0;
        done += n;
        cu->p_cuStreamSynchronize(p->stream);
    }
    return total * 1e3 / (double)o->launches;
}

/* The bare launch: the same kernel, grid and arguments (tensor maps encoded once, up front). */
static double round_bare(const ft_kernel *k, const problem *p, const ft_cuda *cu, const bench_opts *o)
{
    ft_launch l;
    ft_err err;
    double total = 0;
    long done = 0;

    if (ft__kernel_prepare(cu, k, &p->params, &l, &err) != FT_OK) {
        fprintf(stderr, "ft_overhead: %s\n", err.msg);
        return -1;
    }

    while (done < o->launches) {
        long n = o->launches - done < o->batch ? o->launches - done : o->batch, i;
        double t0 = ft__now_ms();
        for (i = 0; i < n; i++) {
            CUresult r = cu->p_cuLaunchKernel(k->fns[0], l.grid[0], l.grid[1], l.grid[2], (unsigned)k->facts.threads, 1, 1,
                                              (unsigned)k->facts.smem_dynamic, p->stream, l.args, NULL);
            if (r != CUDA_SUCCESS) {
                const char *name = "?";
                cu->p_cuGetErrorName(r, &name);
                fprintf(stderr, "ft_overhead: cuLaunchKernel: %s\n", name);
                return -1;
            }
        }
        total += ft__now_ms() - t0;
        done += n;
        cu->p_cuStreamSynchronize(p->stream);
    }
    return total * 1e3 / (double)o->launches;
}

static void json_cold(FILE *f, const char *name, const cold_start *c, int last)
{
    if (c->ok) {
        fprintf(f, "    \"%s\": {\"create_ms\": %.3f, \"first_call_ms\": %.3f}%s\n", name, c->create_ms, c->first_ms,
                last ? "" : ",");
    } else {
        fprintf(f, "    \"%s\": {\"error\": ", name);
        ft__json_string(f, c->error);
        fprintf(f, "}%s\n", last ? "" : ",");
    }
}

static int write_json(const char *path, const bench_opts *o, const ft_session *s, const char *variant,
                      const way ways[2], const cold_start cs[3])
{
    FILE *f = fopen(path, "w");
    int i, w;

    if (f == NULL) {
        fprintf(stderr, "ft_overhead: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(f, "{\n  \"device\": ");
    ft__json_string(f, s->arch.device_name);
    fprintf(f, ",\n  \"arch\": \"%s\",\n  \"driver_version\": %d,\n", s->arch.name, s->cu->driver_version);
    fprintf(f, "  \"flashtune\": \"%s\",\n  \"problem\": {\"b\": %d, \"h\": %d, \"s\": %d, \"d\": %d, "
               "\"dtype\": \"f16\", \"causal\": false},\n", ft_version(), o->b, o->h, o->s, o->d);
    fprintf(f, "  \"variant\": ");
    ft__json_string(f, variant);
    fprintf(f, ",\n  \"launches\": %ld,\n  \"rounds\": %ld,\n  \"batch\": %ld,\n", o->launches, o->rounds,
            o->batch);
    fprintf(f, "  \"host_us_per_call\": {\n");
    for (w = 0; w < 2; w++) {
        fprintf(f, "    \"%s\": {\"median\": %.4f, \"rounds\": [", ways[w].name, ways[w].median_us);
        for (i = 0; i < o->rounds; i++)
            fprintf(f, "%s%.4f", i ? ", " : "", ways[w].us[i]);
        fprintf(f, "]},\n");
    }
    fprintf(f, "    \"overhead\": %.4f,\n    \"bar\": %.1f,\n    \"meets_bar\": %s\n  },\n",
            ways[0].median_us - ways[1].median_us, OVERHEAD_BAR_US,
            ways[0].median_us - ways[1].median_us <= OVERHEAD_BAR_US ? "true" : "false");
    fprintf(f, "  \"cold_start\": {\n");
    json_cold(f, "database_cubin", &cs[0], 0);
    json_cold(f, "compile_cache", &cs[1], 0);
    json_cold(f, "nvrtc", &cs[2], 1);
    fprintf(f, "  }\n}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "ft_overhead: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts o;
    ft_session s;
    ft_spec *spec = NULL;
    ft_variant v;
    ft_kernel k;
    problem p;
    ft_context *ctx = NULL;
    ft_context_options opts;
    ft_err err;
    ft_status rc;
    cold_start cs[3];
    way ways[2] = {{"ft_attention_forward", {0}, 0}, {"cuLaunchKernel", {0}, 0}};
    char work[64] = "/tmp/ft_overhead.XXXXXX", cache_dir[128], db_path[128], text[1024];
    int status = 1, session_open = 0, have_problem = 0, r, i;

    memset(&s, 0, sizeof s);
    memset(&k, 0, sizeof k);
    memset(&p, 0, sizeof p);
    memset(cs, 0, sizeof cs);
    r = parse_args(argc, argv, &o);
    if (r != 0)
        return r == 1 ? 0 : 2;
    if (mkdtemp(work) == NULL) {
        fprintf(stderr, "ft_overhead: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", work);
    snprintf(db_path, sizeof db_path, "%s/tuning.db", work);

    /* The GPU, through flashtune's own driver layer, and the scratch compile cache (empty). */
    rc = ft__session_open(o.device, cache_dir, 0, &s, &err);
    if (rc != FT_OK) {
        fprintf(stderr, "ft_overhead: %s\n", err.msg);
        status = rc == FT_ERR_NO_DRIVER || rc == FT_ERR_NO_DEVICE ? 77 : 1;
        goto out;
    }
    session_open = 1;
    snprintf(text, sizeof text, "%s,d=%d,causal=0,dtype=f16", o.variant, o.d);
    rc = ft__spec_load_default(o.spec, &spec, &err);
    if (rc == FT_OK)
        rc = ft__variant_parse(spec, text, &v, &err);
    if (rc == FT_OK)
        rc = problem_setup(s.cu, &o, &p, &err);
    have_problem = rc == FT_OK;
    if (rc != FT_OK) {
        fprintf(stderr, "ft_overhead: %s\n", err.msg);
        goto out;
    }
    printf("ft_overhead: %s (%s), flashtune %s; b=%d h=%d s=%d d=%d fp16; %s\n", s.arch.device_name, s.arch.name,
           ft_version(), o.b, o.h, o.s, o.d, text);

    /* Cold starts: NVRTC first (the cache is empty and NVRTC not yet used in this process),
     * then the cache it filled, then the database. */
    ft_context_options_init(&opts);
    opts.device = o.device;
    opts.spec = o.spec;
    opts.variant = text;
    opts.database = "";
    opts.cache_dir = cache_dir;
    cold(&opts, &p, s.cu, &cs[2]);
    cold(&opts, &p, s.cu, &cs[1]);

    /* The bare launch's kernel: the same source, from the same cache. */
    rc = ft__session_build(&s, spec, &v, &k, NULL, &err);
    if (rc != FT_OK) {
        fprintf(stderr, "ft_overhead: %s\n", err.msg);
        goto out;
    }
    rc = make_database(db_path, &s, spec, &v, &o, &err);
    if (rc != FT_OK) {
        snprintf(cs[0].error, sizeof cs[0].error, "cannot make the database: %s", err.msg);
    } else {
        opts.variant = NULL; /* the database's winner */
        opts.database = db_path;
        opts.cache_dir = ""; /* no cache: a miss would have to compile, and show */
        cold(&opts, &p, s.cu, &cs[0]);
    }

    /* Host overhead: the same variant through the dispatcher and bare. */
    opts.variant = text;
    opts.database = "";
    opts.cache_dir = cache_dir;
    rc = ft_context_create(&opts, &ctx);
    if (rc == FT_OK)
        rc = ft_attention_forward(ctx, &p.args, p.stream); /* builds the slot */
    if (rc != FT_OK) {
        fprintf(stderr, "ft_overhead: %s: %s\n", ft_status_name(rc), ft_last_error(ctx));
        goto out;
    }
    s.cu->p_cuStreamSynchronize(p.stream);
    if (round_dispatch(ctx, &p, s.cu, &o) < 0 || round_bare(&k, &p, s.cu, &o) < 0) /* warm-up */
        goto out;
    for (r = 0; r < o.rounds; r++) {
        ways[0].us[r] = round_dispatch(ctx, &p, s.cu, &o);
        ways[1].us[r] = round_bare(&k, &p, s.cu, &o);
        if (ways[0].us[r] < 0 || ways[1].us[r] < 0)
            goto out;
    }
    for (i = 0; i < 2; i++)
        ways[i].median_us = median(ways[i].us, (int)o.rounds);

    printf("\nhost time per call (median of %ld rounds of %ld launches, batches of %ld)\n", o.rounds, o.launches,
           o.batch);
    printf("  %-24s %9.3f us\n", ways[0].name, ways[0].median_us);
    printf("  %-24s %9.3f us\n", ways[1].name, ways[1].median_us);
    printf("  %-24s %9.3f us   (bar: at most %.1f us: %s)\n", "dispatcher overhead",
           ways[0].median_us - ways[1].median_us, OVERHEAD_BAR_US,
           ways[0].median_us - ways[1].median_us <= OVERHEAD_BAR_US ? "met" : "NOT met");
    printf("\nfirst ft_attention_forward of a new context (ft_context_create beside it)\n");
    {
        static const char *const names[3] = {"database cubin", "compile cache", "NVRTC compile"};
        for (i = 0; i < 3; i++) {
            if (cs[i].ok)
                printf("  %-24s %9.2f ms   (create %.2f ms)\n", names[i], cs[i].first_ms, cs[i].create_ms);
            else
                printf("  %-24s failed: %s\n", names[i], cs[i].error);
        }
    }
    status = 0;
    if (o.json != NULL && write_json(o.json, &o, &s, text, ways, cs) != 0)
        status = 1;
out:
    ft_context_destroy(ctx);
    if (session_open) {
        if (have_problem)
            problem_free(s.cu, &p);
        ft__kernel_unload(s.cu, &k);
        ft__session_close(&s);
    }
    ft__spec_free(spec);
    remove_tree(work);
    return status;
}
