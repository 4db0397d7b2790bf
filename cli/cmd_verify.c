/* flashtune verify: every variant of a spec that fits the GPU, over a set of shapes. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/fs.h"
#include "common/json.h"
#include "generator/family.h"
#include "generator/variant.h"
#include "tuner/plan.h"
#include "runtime/session.h"

static const char usage[] =
    "usage: flashtune verify [SPEC] [options]\n"
    "\n"
    "Compiles every variant of the spec (default: the built-in flash_fwd) that fits the GPU\n"
    "and checks each against the reference over a set of shapes: odd sequence lengths,\n"
    "seqlen_q != seqlen_k both ways, grouped-query heads, strided layouts, large scores.\n"
    "Forward kernels are checked on O and the LSE, backward ones (flash_bwd, flash_bwd_sm90)\n"
    "on dQ, dK and dV, deterministic ones also for the same bits twice.\n"
    "Prints one row per variant and exits non-zero if any fails.\n"
    "\n"
    "  --only FILTER     only the variants matching, e.g. 'd=128,causal=1'\n"
    "  --shapes SET      quick (default) or full\n"
    "  --device N|NAME   GPU ordinal, or the first GPU whose name contains NAME (default 0)\n"
    "  -j, --jobs N      parallel compilations (default: the number of cores)\n"
    "  --cache-dir DIR   compile cache\n"
    "  --json            JSON lines on stdout: one per variant (result pass, fail or skip), then\n"
    "                    one with the summary\n"
    "  -q, --quiet       no progress display\n";

typedef struct shape_case {
    const char *shape;
    ft_layout layout;
    float qk_std; /* 6: scores in the hundreds */
    int full_only;
} shape_case;

static const shape_case cases[] = {
    {"b=1,hq=1,sq=1,sk=1", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=2,hq=3,sq=17,sk=17", FT_LAYOUT_BHSD, 1.f, 0},
    {"b=1,hq=2,sq=127,sk=1000", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=1,hq=2,sq=1000,sk=127", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=2,hq=8,hkv=1,sq=257,sk=200", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=2,hq=4,sq=300,sk=300", FT_LAYOUT_QKV_PACKED, 1.f, 0},
    {"b=1,hq=2,sq=513,sk=513", FT_LAYOUT_BSHD, 6.f, 0},
    {"b=1,hq=1,sq=4097,sk=4097", FT_LAYOUT_BSHD, 1.f, 0},
    /* Serving: one to a few queries against long keys (split keys, packed query heads, rows of a
     * group spanning two blocks, causal rows that see different numbers of keys). */
    {"b=2,hq=8,hkv=2,sq=1,sk=5000", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=1,hq=16,hkv=2,sq=3,sk=2049", FT_LAYOUT_BHSD, 6.f, 0},
    {"b=3,hq=4,sq=16,sk=777", FT_LAYOUT_BSHD, 1.f, 0},
    /* A group of 16 (in a packed forward block each warp's 16 rows are then one position, both
     * of a thread's rows at the same one), head-major, seqlen_k > seqlen_q. */
    {"b=1,hq=32,hkv=2,sq=300,sk=333", FT_LAYOUT_BHSD, 1.f, 0},
    {"b=3,hq=6,hkv=2,sq=1000,sk=1000", FT_LAYOUT_BHSD, 1.f, 1},
    {"b=1,hq=32,hkv=4,sq=1,sk=65536", FT_LAYOUT_BSHD, 1.f, 1},
    {"b=1,hq=2,sq=64,sk=4097", FT_LAYOUT_BSHD, 6.f, 1},
    {"b=1,hq=2,sq=4097,sk=64", FT_LAYOUT_BSHD, 1.f, 1},
    {"b=2,hq=2,sq=2048,sk=2048", FT_LAYOUT_QKV_PACKED, 6.f, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* The backward's (the layouts its checks take; scores in the hundreds with qk_std 10). */
static const shape_case bwd_cases[] = {
    {"b=2,hq=4,sq=1,sk=1", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=2,hq=3,sq=17,sk=17", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=1,hq=2,sq=127,sk=127", FT_LAYOUT_BHSD, 1.f, 0},
    {"b=2,hq=2,hkv=1,sq=1000,sk=1000", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=1,hq=8,hkv=1,sq=1000,sk=127", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=2,hq=4,hkv=1,sq=127,sk=1000", FT_LAYOUT_BHSD, 1.f, 0},
    {"b=2,hq=4,hkv=2,sq=1000,sk=1000", FT_LAYOUT_BSHD, 10.f, 0},
    {"b=1,hq=1,sq=4097,sk=4097", FT_LAYOUT_BSHD, 1.f, 0},
    {"b=1,hq=2,sq=17,sk=4097", FT_LAYOUT_BSHD, 1.f, 1},
    {"b=1,hq=4,sq=4097,sk=17", FT_LAYOUT_BHSD, 1.f, 1},
    {"b=3,hq=16,hkv=2,sq=513,sk=513", FT_LAYOUT_BHSD, 1.f, 1},
};
#define NBWD_CASES (int)(sizeof bwd_cases / sizeof bwd_cases[0])

/* One shape's inputs and reference, for the spec's operation. */
typedef struct target {
    const ft_op *op;
    ft_tensors fwd;
    ft_bwd_tensors bwd;
} target;

/* What one kernel did on one shape. */
typedef struct outcome {
    int pass;
    double l2;    /* the forward: O's relative L2 error; the backward: the largest of the gradients' */
    double other; /* the forward: the LSE's largest error; the backward: the worst element over its bound */
    char detail[300];
} outcome;

static ft_status target_make(ft_session *s, const ft_op *op, const ft_problem *p, uint64_t seed, float qk_std,
                             target *t, ft_err *err)
{
    ft_status rc;

    memset(t, 0, sizeof *t);
    t->op = op;
    if (op == &ft__op_bwd) {
        rc = ft__bwd_tensors_create(s->cu, p, &t->bwd, err);
        if (rc == FT_OK && (rc = ft__bwd_tensors_prepare(&s->verifier, &t->bwd, seed, qk_std, err)) != FT_OK)
            ft__bwd_tensors_destroy(s->cu, &t->bwd);
        return rc;
    }
    rc = ft__tensors_create(s->cu, p, &t->fwd, err);
    if (rc == FT_OK && ((rc = ft__tensors_fill(&s->verifier, &t->fwd, seed, qk_std, err)) != FT_OK ||
                        (rc = ft__tensors_reference(&s->verifier, &t->fwd, err)) != FT_OK))
        ft__tensors_destroy(s->cu, &t->fwd);
    return rc;
}

static void target_free(ft_session *s, target *t)
{
    if (t->op == &ft__op_bwd)
        ft__bwd_tensors_destroy(s->cu, &t->bwd);
    else
        ft__tensors_destroy(s->cu, &t->fwd);
}

static ft_status target_check(ft_session *s, const ft_kernel *k, target *t, outcome *o, ft_err *err)
{
    ft_status rc;
    int i;

    memset(o, 0, sizeof *o);
    if (t->op == &ft__op_bwd) {
        ft_bwd_check c;
        rc = ft__verify_bwd_kernel(&s->verifier, k, &t->bwd, &c, err);
        o->pass = c.pass;
        for (i = 0; i < 3; i++) {
            o->l2 = c.rel_l2[i] > o->l2 ? c.rel_l2[i] : o->l2;
            o->other = c.worst[i] > o->other ? c.worst[i] : o->other;
        }
        snprintf(o->detail, sizeof o->detail, "%s", c.detail);
        return rc;
    }
    {
        ft_check c;
        rc = ft__verify_kernel(&s->verifier, k, &t->fwd, &c, err);
        o->pass = c.pass;
        o->l2 = c.o_rel_l2;
        o->other = c.lse_max_err;
        snprintf(o->detail, sizeof o->detail, "%s", c.detail);
    }
    return rc;
}

typedef struct row {
    int passed, ran;
    double worst_l2, worst_other;
    char failure[400];
} row;

/* The spec's family, when verify checks its operation (the forward's or the backward's); else
 * NULL and err says why. */
static const ft_family *family_of(const ft_spec *spec, ft_err *err)
{
    const ft_family *fam = ft__spec_family(spec, err);

    if (fam != NULL && fam->op != &ft__op_fwd && fam->op != &ft__op_bwd) {
        ft__spec_check_op(spec, &ft__op_fwd, "verify checks", err);
        return NULL;
    }
    return fam;
}

static void on_progress(void *ud, const ft_plan *plan, const ft_plan_item *it, int done, int total)
{
    (void)plan;
    (void)total;
    cli_progress_update(ud, done, it->variant_str);
}

int cmd_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"only", required_argument, NULL, 'o'},  {"shapes", required_argument, NULL, 's'},
        {"device", required_argument, NULL, 'd'}, {"jobs", required_argument, NULL, 'j'},
        {"cache-dir", required_argument, NULL, 'C'}, {"quiet", no_argument, NULL, 'q'},
        {"json", no_argument, NULL, 'J'},         {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *only = NULL, *cache_dir = NULL, *spec_path = NULL;
    int full = 0, quiet = 0, json = 0, ch, status = 1, i, c, failed = 0, verified = 0, w;
    long device = 0, jobs = 0;
    ft_session s;
    ft_spec *spec = NULL;
    ft_plan *plan = NULL;
    ft_variant filter;
    unsigned mask = 0;
    row *rows = NULL;
    char *done = NULL;
    cli_progress bar;
    const ft_family *fam = NULL;
    const shape_case *set = cases;
    int ncases = NCASES, bwd = 0;
    ft_err err;

    memset(&s, 0, sizeof s);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "j:qh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'o': only = optarg; break;
        case 's':
            if (strcmp(optarg, "full") != 0 && strcmp(optarg, "quick") != 0)
                return cli_usage_error("verify", "--shapes takes quick or full");
            full = strcmp(optarg, "full") == 0;
            break;
        case 'd': {
            int d, st;
            if (!cli_parse_device("verify", optarg, 0, &d, &st))
                return st;
            device = d;
            break;
        }
        case 'j':
            if (!cli_parse_int("verify", "--jobs", optarg, 1, 1024, &jobs))
                return EXIT_USAGE;
            break;
        case 'C': cache_dir = optarg; break;
        case 'q': quiet = 1; break;
        case 'J': json = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_usage_error("verify", "bad option");
        }
    }
    if (optind < argc)
        spec_path = argv[optind++];
    if (optind != argc)
        return cli_usage_error("verify", "unexpected argument '%s'", argv[optind]);
    if (ft__spec_load_default(spec_path, &spec, &err) != FT_OK || (fam = family_of(spec, &err)) == NULL ||
        (only != NULL && (ft__spec_add_values(spec, only, &err) != FT_OK ||
                          ft__variant_filter_parse(spec, only, &filter, &mask, &err) != FT_OK)) ||
        ft__session_open((int)device, cache_dir, 1, &s, &err) != FT_OK ||
        ft__plan_build_kept(spec, &s.arch, &filter, mask, &plan, &err) != FT_OK) {
        status = cli_fail("verify", &err);
        goto out;
    }
    /* (Only what pruning keeps is an item: verify reports the pruned ones as a count.) */
    if (plan->nitems == 0) {
        fprintf(stderr, "flashtune verify: all %d variants of %s%s%s are pruned for %s; nothing to verify\n",
                plan->count[FT_PLAN_PRUNED], spec->path, only ? " matching " : "", only ? only : "", s.arch.name);
        goto out;
    }
    bwd = fam->op == &ft__op_bwd;
    if (bwd)
        set = bwd_cases, ncases = NBWD_CASES;
    plan->keep_cubins = 1;
    cli_progress_start(&bar, "compiling", plan->count[FT_PLAN_PENDING], quiet);
    if (ft__plan_compile(plan, s.cache, (int)jobs, on_progress, &bar, cli_stop_flag(), &err) != FT_OK) {
        cli_progress_finish(&bar);
        status = cli_fail("verify", &err);
        goto out;
    }
    cli_progress_finish(&bar);
    rows = calloc((size_t)plan->nitems, sizeof *rows);
    done = calloc((size_t)plan->nitems, 1);
    if (rows == NULL || done == NULL) {
        fprintf(stderr, "flashtune verify: out of memory\n");
        goto out;
    }
    cli_progress_start(&bar, "verifying", plan->count[FT_PLAN_COMPILED], quiet);
    /* Variants of one (head dim, causal, dtype) share inputs and the reference. */
    for (i = 0; i < plan->nitems; i++) {
        ft_problem base;
        int j;
        if (done[i] || plan->items[i].status != FT_PLAN_COMPILED)
            continue;
        memset(&base, 0, sizeof base);
        ft__variant_problem(spec, &plan->items[i].variant, &base);
        for (c = 0; c < ncases; c++) {
            ft_problem p = base;
            target t;
            char shape[128];
            if (set[c].full_only && !full)
                continue;
            p.layout = set[c].layout;
            snprintf(shape, sizeof shape, "%s,d=%d", set[c].shape, base.head_dim);
            if (ft__problem_parse(shape, &p, &err) != FT_OK)
                goto fail;
            if (target_make(&s, fam->op, &p, 1000 + (uint64_t)c, set[c].qk_std, &t, &err) != FT_OK)
                goto fail;
            for (j = i; j < plan->nitems; j++) {
                ft_plan_item *it = &plan->items[j];
                ft_problem q;
                ft_kernel k;
                outcome check;
                ft_err kerr;
                if (it->status != FT_PLAN_COMPILED)
                    continue;
                memset(&q, 0, sizeof q);
                ft__variant_problem(spec, &it->variant, &q);
                if (q.head_dim != base.head_dim || q.causal != base.causal || q.bf16 != base.bf16)
                    continue;
                rows[j].ran++;
                if (ft__session_load(&s, spec, &it->variant, it->compiled.cubin, it->source.entry,
                                     it->smem_dynamic, it->threads, &k, &kerr) != FT_OK) {
                    snprintf(rows[j].failure, sizeof rows[j].failure, "load: %s", kerr.msg);
                    continue;
                }
                if (target_check(&s, &k, &t, &check, &kerr) != FT_OK) {
                    /* A fault poisons the context; nothing after it can be trusted. */
                    ft__kernel_unload(s.cu, &k);
                    target_free(&s, &t);
                    fprintf(stderr, "flashtune verify: %s on %s: %s\n", it->variant_str, set[c].shape, kerr.msg);
                    goto out;
                }
                ft__kernel_unload(s.cu, &k);
                if (check.pass)
                    rows[j].passed++;
                else if (rows[j].failure[0] == '\0')
                    snprintf(rows[j].failure, sizeof rows[j].failure, "%s %s: %s", set[c].shape,
                             ft__layout_name(set[c].layout), check.detail);
                if (check.l2 > rows[j].worst_l2)
                    rows[j].worst_l2 = check.l2;
                if (check.other > rows[j].worst_other)
                    rows[j].worst_other = check.other;
                if (c == ncases - 1 || (!full && set[c + 1].full_only)) {
                    done[j] = 1;
                    cli_progress_update(&bar, ++verified, it->variant_str);
                }
            }
            target_free(&s, &t);
        }
    }
    cli_progress_finish(&bar);
    w = cli_variant_width(plan);
    if (!json)
        printf("%-*s %-6s %7s %10s %10s  %s\n", w, "variant", "result", "shapes", bwd ? "grad L2" : "O rel L2",
               bwd ? "worst/bnd" : "LSE err", "first failure");
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        const row *r = &rows[i];
        const int ran = it->status == FT_PLAN_COMPILED, ok = ran && r->passed == r->ran && r->ran > 0;
        if (it->status == FT_PLAN_PRUNED)
            continue;
        failed += ran && !ok;
        if (json) {
            printf("{\"variant\": ");
            ft__json_string(stdout, it->variant_str);
            printf(", \"result\": \"%s\"", !ran ? "skip" : ok ? "pass" : "fail");
            if (ran)
                printf(", \"shapes_passed\": %d, \"shapes\": %d, \"%s\": %.3e, \"%s\": %.3e, \"first_failure\": ",
                       r->passed, r->ran, bwd ? "grad_rel_l2" : "o_rel_l2", r->worst_l2,
                       bwd ? "worst_of_bound" : "lse_err", r->worst_other);
            else
                printf(", \"reason\": ");
            ft__json_string(stdout, ran ? r->failure : it->reason);
            printf("}\n");
        } else if (ran) {
            printf("%-*s %-6s %3d/%-3d %10.2e %10.2e  %s\n", w, it->variant_str, ok ? "pass" : "FAIL", r->passed,
                   r->ran, r->worst_l2, r->worst_other, r->failure);
        } else {
            printf("%-*s %-6s %7s %10s %10s  %s\n", w, it->variant_str, "skip", "-", "-", "-", it->reason);
        }
    }
    if (json) {
        printf("{\"summary\": {\"device\": ");
        ft__json_string(stdout, s.arch.device_name);
        printf(", \"arch\": \"%s\", \"verified\": %d, \"pass\": %d, \"fail\": %d, \"pruned\": %d, \"not_built\": %d}}\n",
               s.arch.name, plan->count[FT_PLAN_COMPILED], plan->count[FT_PLAN_COMPILED] - failed, failed,
               plan->count[FT_PLAN_PRUNED], plan->count[FT_PLAN_COMPILE_ERROR] + plan->count[FT_PLAN_OVER_LIMITS]);
    } else {
        printf("summary (%s, %s): %d variants verified: %d pass, %d fail; %d pruned, %d did not compile or fit\n",
               s.arch.device_name, s.arch.name, plan->count[FT_PLAN_COMPILED], plan->count[FT_PLAN_COMPILED] - failed,
               failed, plan->count[FT_PLAN_PRUNED], plan->count[FT_PLAN_COMPILE_ERROR] + plan->count[FT_PLAN_OVER_LIMITS]);
    }
    status = failed == 0 && plan->count[FT_PLAN_COMPILED] > 0 ? 0 : 1;
    goto out;
fail:
    status = cli_fail("verify", &err);
out:
    free(rows);
    free(done);
    ft__plan_free(plan);
    ft__session_close(&s);
    ft__spec_free(spec);
    return status;
}
