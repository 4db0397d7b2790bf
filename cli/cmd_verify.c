/* flashtune verify: every variant of a spec that fits the GPU, over a set of shapes. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/fs.h"
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
    "Prints one row per variant and exits non-zero if any fails.\n"
    "\n"
    "  --only FILTER     only the variants matching, e.g. 'd=128,causal=1'\n"
    "  --shapes SET      quick (default) or full\n"
    "  --device N        GPU ordinal (default 0)\n"
    "  -j, --jobs N      parallel compilations (default: the number of cores)\n"
    "  --cache-dir DIR   compile cache\n"
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
    {"b=3,hq=6,hkv=2,sq=1000,sk=1000", FT_LAYOUT_BHSD, 1.f, 1},
    {"b=1,hq=2,sq=64,sk=4097", FT_LAYOUT_BSHD, 6.f, 1},
    {"b=1,hq=2,sq=4097,sk=64", FT_LAYOUT_BSHD, 1.f, 1},
    {"b=2,hq=2,sq=2048,sk=2048", FT_LAYOUT_QKV_PACKED, 6.f, 1},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

typedef struct row {
    int passed, ran;
    double worst_l2, worst_lse;
    char failure[400];
} row;

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
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *only = NULL, *cache_dir = NULL, *spec_path = NULL;
    int full = 0, quiet = 0, ch, status = 1, i, c, failed = 0, verified = 0;
    long device = 0, jobs = 0;
    ft_session s;
    ft_spec *spec = NULL;
    ft_plan *plan = NULL;
    ft_variant filter;
    unsigned mask = 0;
    row *rows = NULL;
    char *done = NULL;
    cli_progress bar;
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
        case 'd':
            if (!cli_parse_int("verify", "--device", optarg, 0, 1023, &device))
                return EXIT_USAGE;
            break;
        case 'j':
            if (!cli_parse_int("verify", "--jobs", optarg, 1, 1024, &jobs))
                return EXIT_USAGE;
            break;
        case 'C': cache_dir = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_usage_error("verify", "bad option");
        }
    }
    if (optind < argc)
        spec_path = argv[optind++];
    if (optind != argc)
        return cli_usage_error("verify", "unexpected argument '%s'", argv[optind]);
    if (ft__spec_load_default(spec_path, &spec, &err) != FT_OK ||
        ft__spec_check_op(spec, &ft__op_fwd, "verify checks", &err) != FT_OK ||
        (only != NULL && ft__variant_filter_parse(spec, only, &filter, &mask, &err) != FT_OK) ||
        ft__session_open((int)device, cache_dir, 1, &s, &err) != FT_OK ||
        ft__plan_build(spec, &s.arch, &filter, mask, &plan, &err) != FT_OK) {
        status = cli_fail("verify", &err);
        goto out;
    }
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
        for (c = 0; c < NCASES; c++) {
            ft_problem p = base;
            ft_tensors t;
            char shape[128];
            if (cases[c].full_only && !full)
                continue;
            p.layout = cases[c].layout;
            snprintf(shape, sizeof shape, "%s,d=%d", cases[c].shape, base.head_dim);
            if (ft__problem_parse(shape, &p, &err) != FT_OK)
                goto fail;
            if (ft__tensors_create(s.cu, &p, &t, &err) != FT_OK)
                goto fail;
            if (ft__tensors_fill(&s.verifier, &t, 1000 + (uint64_t)c, cases[c].qk_std, &err) != FT_OK ||
                ft__tensors_reference(&s.verifier, &t, &err) != FT_OK) {
                ft__tensors_destroy(s.cu, &t);
                goto fail;
            }
            for (j = i; j < plan->nitems; j++) {
                ft_plan_item *it = &plan->items[j];
                ft_problem q;
                ft_kernel k;
                ft_check check;
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
                if (ft__verify_kernel(&s.verifier, &k, &t, &check, &kerr) != FT_OK) {
                    /* A fault poisons the context; nothing after it can be trusted. */
                    ft__kernel_unload(s.cu, &k);
                    ft__tensors_destroy(s.cu, &t);
                    fprintf(stderr, "flashtune verify: %s on %s: %s\n", it->variant_str, cases[c].shape, kerr.msg);
                    goto out;
                }
                ft__kernel_unload(s.cu, &k);
                if (check.pass)
                    rows[j].passed++;
                else if (rows[j].failure[0] == '\0')
                    snprintf(rows[j].failure, sizeof rows[j].failure, "%s %s: %s", cases[c].shape,
                             ft__layout_name(cases[c].layout), check.detail);
                if (check.o_rel_l2 > rows[j].worst_l2)
                    rows[j].worst_l2 = check.o_rel_l2;
                if (check.lse_max_err > rows[j].worst_lse)
                    rows[j].worst_lse = check.lse_max_err;
                if (c == NCASES - 1 || (!full && cases[c + 1].full_only)) {
                    done[j] = 1;
                    cli_progress_update(&bar, ++verified, it->variant_str);
                }
            }
            ft__tensors_destroy(s.cu, &t);
        }
    }
    cli_progress_finish(&bar);
    printf("%-62s %-6s %7s %10s %10s  %s\n", "variant", "result", "shapes", "O rel L2", "LSE err", "first failure");
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        const row *r = &rows[i];
        if (it->status == FT_PLAN_COMPILED) {
            int ok = r->passed == r->ran && r->ran > 0;
            failed += !ok;
            printf("%-62s %-6s %3d/%-3d %10.2e %10.2e  %s\n", it->variant_str, ok ? "pass" : "FAIL", r->passed,
                   r->ran, r->worst_l2, r->worst_lse, r->failure);
        } else if (it->status != FT_PLAN_PRUNED) {
            printf("%-62s %-6s %7s %10s %10s  %s\n", it->variant_str, "skip", "-", "-", "-", it->reason);
        }
    }
    printf("summary (%s, %s): %d variants verified: %d pass, %d fail; %d pruned, %d did not compile or fit\n",
           s.arch.device_name, s.arch.name, plan->count[FT_PLAN_COMPILED], plan->count[FT_PLAN_COMPILED] - failed,
           failed, plan->count[FT_PLAN_PRUNED], plan->count[FT_PLAN_COMPILE_ERROR] + plan->count[FT_PLAN_OVER_LIMITS]);
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
