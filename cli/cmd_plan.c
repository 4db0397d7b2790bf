/* flashtune plan: expand, prune, generate and compile a spec's variants for one target. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/fs.h"
#include "common/json.h"
#include "generator/variant.h"
#include "tuner/plan.h"

static const char usage[] =
    "usage: flashtune plan [SPEC] [options]   (default SPEC: the built-in flash_fwd)\n"
    "\n"
    "Expands the spec's variants for one target, prunes them by its constraints and the\n"
    "target's limits, generates and compiles the rest with NVRTC, and prints one row per\n"
    "variant (the pruned ones as pruning turns them away, then the rest) and a summary.\n"
    "Needs no GPU.\n"
    "\n"
    "  --arch NAME       target: sm_80, sm_86, sm_89, sm_90, sm_90a (default sm_90)\n"
    "  -j, --jobs N      parallel compilations (default: the number of cores)\n"
    "  --only FILTER     only the variants matching, e.g. 'd=128,causal=1'\n"
    "  --sample N        compile only N of the variants that pruning keeps (pruning still\n"
    "                    runs on all): first ones that bring every value of every parameter\n"
    "                    that a kept variant has, then one from each of equal stretches of\n"
    "                    the rest; the same N and seed always give the same sample\n"
    "  --seed S          which sample (default 0)\n"
    "  --json            JSON lines on stdout instead of the table, streamed: the plan first\n"
    "                    (\"kind\": \"plan\"), each variant as its fate is known (\"variant\":\n"
    "                    pruned and unsampled ones at once, the others as they compile), the\n"
    "                    summary last (\"summary\")\n"
    "  --cache-dir DIR   compile cache (default $FLASHTUNE_CACHE_DIR, else\n"
    "                    $XDG_CACHE_HOME/flashtune or ~/.cache/flashtune)\n"
    "  --no-cache        neither read nor write the compile cache\n"
    "  -q, --quiet       no progress display\n";

typedef struct plan_opts {
    const char *spec_path;
    const char *arch;
    const char *only;
    const char *cache_dir;
    long long seed;
    int sample;           /* 0: every kept variant */
    int jobs;
    int json;
    int no_cache;
    int quiet;
} plan_opts;

typedef struct progress_ctx {
    cli_progress bar;
    int json; /* print each compiled item's JSON line */
} progress_ctx;

static void print_json_item(const ft_plan_item *it);

/* Called under the plan's lock: one thread at a time. */
static void on_progress(void *ud, const ft_plan *plan, const ft_plan_item *it, int done, int total)
{
    progress_ctx *pc = ud;
    (void)plan;
    (void)total;
    if (pc->json)
        print_json_item(it);
    cli_progress_update(&pc->bar, done, it->variant_str);
}

/* The pruned variants, printed as pruning turns them away (ft__plan_build_streamed) and
 * counted by reason class, not kept: the plan holds only what it may compile. */
/* Reason classes in order of first sight, and how many variants each (print_reasons). */
typedef struct reason_tally {
    int n;
    char classes[64][160];
    long long counts[64];
} reason_tally;

static void tally_add(reason_tally *t, const char *reason_class)
{
    int k;

    for (k = 0; k < t->n && strcmp(t->classes[k], reason_class) != 0; k++)
        ;
    if (k == t->n && k < 64)
        snprintf(t->classes[t->n++], sizeof t->classes[0], "%s", reason_class);
    if (k < t->n)
        t->counts[k]++;
}

typedef struct pruned_rows {
    int json;
    int width;             /* the table's variant column */
    long long variants;    /* the variants the plan covers (the JSON plan line's count) */
    int header;            /* the table's header or the JSON plan line is out */
    reason_tally reasons;  /* of the pruned variants */
} pruned_rows;

static void print_json_plan(const ft_plan *plan, long long variants);
static void print_header(int width);

static void start_output(pruned_rows *pr, const ft_plan *plan)
{
    if (pr->header)
        return;
    pr->header = 1;
    if (pr->json)
        print_json_plan(plan, pr->variants);
    else
        print_header(pr->width);
}

static void on_pruned(void *ud, const ft_plan *plan, const ft_plan_item *it)
{
    pruned_rows *pr = ud;

    start_output(pr, plan);
    tally_add(&pr->reasons, it->reason_class);
    if (pr->json)
        print_json_item(it);
    else
        printf("%-*s %-13s %5s %6s %6s %7s %9s  %s\n", pr->width, it->variant_str, "pruned", "-", "-", "-", "-", "-",
               it->reason);
}

/* The widest variant text the plan can have: each parameter's longest value among those the
 * filter allows, at least as wide as any row, known before a row is printed. */
static int variant_width(const ft_spec *spec, const ft_variant *filter, unsigned mask)
{
    int i, k, w = 0;

    for (i = 0; i < spec->nparams; i++) {
        const ft_param *p = &spec->params[i];
        int longest = 0;
        for (k = 0; k < p->nvalues; k++) {
            char value[32];
            int n;
            if ((mask & (1u << i)) && filter->idx[i] != k)
                continue;
            n = p->kind == FT_PARAM_INT ? snprintf(value, sizeof value, "%lld", (long long)p->ints[k])
                                        : (int)strlen(p->strings[k]);
            if (n > longest)
                longest = n;
        }
        w += (i > 0) + (int)strlen(p->name) + 1 + longest;
    }
    return w > 62 ? w : 62;
}

/* How many variants the plan covers: the filter fixes each parameter it names to one value. */
static long long matching_variants(const ft_spec *spec, unsigned mask)
{
    long long count = spec->nvariants;
    int i;

    for (i = 0; i < spec->nparams; i++)
        if (mask & (1u << i))
            count /= spec->params[i].nvalues;
    return count;
}

int cli_variant_width(const ft_plan *plan)
{
    int i, w = 62;

    for (i = 0; i < plan->nitems; i++)
        if ((int)strlen(plan->items[i].variant_str) > w)
            w = (int)strlen(plan->items[i].variant_str);
    return w;
}

static void print_header(int w)
{
    printf("%-*s %-13s %5s %6s %6s %7s %9s  %s\n", w, "variant", "status", "regs", "spill", "smem",
           "dynsmem", "compile", "note");
}

/* The rows of the variants pruning kept (the pruned ones are out already: on_pruned). */
static void print_table(const ft_plan *plan, int w)
{
    int i;

    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        const ft_resource_report *r = &it->report;
        if (it->status == FT_PLAN_PRUNED) {
            printf("%-*s %-13s %5s %6s %6s %7s %9s  %s\n", w, it->variant_str, "pruned", "-", "-", "-",
                   "-", "-", it->reason);
            continue;
        }
        if (it->status == FT_PLAN_NOT_SAMPLED) {
            printf("%-*s %-13s %5s %6s %6s %7lld %9s  %s\n", w, it->variant_str, "not-sampled", "-", "-",
                   "-", it->smem_dynamic, "-", it->reason);
            continue;
        }
        if (it->status == FT_PLAN_COMPILE_ERROR) {
            printf("%-*s %-13s %5s %6s %6s %7lld %7.0fms  %s\n", w, it->variant_str, "compile-error",
                   "-", "-", "-", it->smem_dynamic, it->compile_ms, it->reason);
            continue;
        }
        printf("%-*s %-13s %5d %6lld %6lld %7lld %7.0fms  %s%s%s\n", w, it->variant_str,
               ft__plan_status_name(it->status), r->registers,
               r->spill_stores > r->spill_loads ? r->spill_stores : r->spill_loads, r->smem_static,
               it->smem_dynamic, it->compile_ms, it->cache_hit ? "cached" : "",
               it->status == FT_PLAN_OVER_LIMITS && it->cache_hit ? "; " : "",
               it->status == FT_PLAN_OVER_LIMITS ? it->reason : "");
    }
}

/* Counts of each reason class, most frequent first: of the pruned variants (tallied as they
 * were turned away) or of the items of another status. */
static void print_reasons(const ft_plan *plan, const pruned_rows *pr, ft_plan_status status, const char *label)
{
    static reason_tally items; /* (16 KB: not on the stack) */
    const reason_tally *t = &pr->reasons;
    const char *classes[64];
    long long counts[64];
    int n, i, k;

    if (status != FT_PLAN_PRUNED) {
        memset(&items, 0, sizeof items);
        for (i = 0; i < plan->nitems; i++)
            if (plan->items[i].status == status)
                tally_add(&items, plan->items[i].reason_class);
        t = &items;
    }
    for (n = 0; n < t->n; n++)
        classes[n] = t->classes[n], counts[n] = t->counts[n];
    if (n == 0)
        return;
    printf("%s:", label);
    while (n > 0) {
        int best = 0;
        for (k = 1; k < n; k++)
            if (counts[k] > counts[best])
                best = k;
        printf(" %lld %s%s", counts[best], classes[best], n > 1 ? ";" : "\n");
        classes[best] = classes[n - 1];
        counts[best] = counts[n - 1];
        n--;
    }
}

static void print_summary(const ft_plan *plan, const pruned_rows *pr, const ft_plan_sample_info *sample,
                          long long seed, const ft_cache *cache, double wall_ms, double nvrtc_ms, int jobs)
{
    char wall[32], cpu[32], sampled[48] = "";
    int spills = 0;
    int i;

    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        if (it->status == FT_PLAN_COMPILED && (it->report.spill_stores > 0 || it->report.spill_loads > 0))
            spills++;
    }
    cli_format_duration(wall_ms, wall, sizeof wall);
    cli_format_duration(nvrtc_ms, cpu, sizeof cpu);
    if (sample != NULL)
        snprintf(sampled, sizeof sampled, ", %d not sampled", plan->count[FT_PLAN_NOT_SAMPLED]);
    printf("summary (%s%s%s): %d variants: %d compiled (%d with register spills), %d pruned%s, "
           "%d compile errors, %d over limits\n",
           plan->arch.name, plan->arch.from_device ? ", " : "", plan->arch.device_name,
           plan->nitems + plan->count[FT_PLAN_PRUNED],
           plan->count[FT_PLAN_COMPILED], spills, plan->count[FT_PLAN_PRUNED], sampled,
           plan->count[FT_PLAN_COMPILE_ERROR], plan->count[FT_PLAN_OVER_LIMITS]);
    print_reasons(plan, pr, FT_PLAN_PRUNED, "pruned");
    print_reasons(plan, pr, FT_PLAN_OVER_LIMITS, "over limits");
    if (sample != NULL) {
        printf("sample: %d of %d kept variants (seed %lld), ", sample->sampled, sample->kept, seed);
        if (sample->uncovered == 0)
            printf("with every one of the %d parameter values that kept variants have\n", sample->values);
        else
            printf("without %d of the %d parameter values that kept variants have: %s\n",
                   sample->uncovered, sample->values, sample->missing);
    }
    if (cache != NULL) {
        ft_cache_stats s = ft__cache_stats(cache);
        printf("cache: %lld hits, %lld compiled%s (%s)\n", s.hits, s.misses,
               s.corrupt ? ", corrupt entries recompiled" : "", ft__cache_dir(cache));
        if (s.corrupt > 0 && s.removed == s.corrupt)
            printf("cache: %lld corrupt entries removed and recompiled\n", s.corrupt);
        else if (s.corrupt > 0)
            printf("cache: %lld corrupt entries recompiled; %lld removed, %lld could not be (is the cache read-only?)\n",
                   s.corrupt, s.removed, s.corrupt - s.removed);
    }
    printf("time: %s wall, %s of NVRTC on %d threads\n", wall, cpu, jobs);
}

/* --json: the plan's line, each variant's (print_json_items for those whose fate is known
 * before compiling: pruned, not sampled), the summary's. */
static void print_json_plan(const ft_plan *plan, long long variants)
{
    printf("{\"kind\": \"plan\", \"spec\": ");
    ft__json_string(stdout, plan->spec->path);
    printf(", \"template\": ");
    ft__json_string(stdout, plan->family->name);
    printf(", \"arch\": {\"name\": \"%s\", \"cc\": %d, \"from_device\": %s, \"smem_per_block\": %lld, "
           "\"regs_per_thread\": %d}, \"variants\": %lld}\n",
           plan->arch.name, plan->arch.cc, plan->arch.from_device ? "true" : "false",
           plan->arch.smem_per_block, plan->arch.regs_per_thread, variants);
    fflush(stdout);
}

static void print_json_item(const ft_plan_item *it)
{
    printf("{\"kind\": \"variant\", \"variant\": ");
    ft__json_string(stdout, it->variant_str);
    printf(", \"status\": \"%s\"", ft__plan_status_name(it->status));
    if (it->status != FT_PLAN_COMPILED) {
        printf(", \"reason\": ");
        ft__json_string(stdout, it->reason);
    }
    if (it->status == FT_PLAN_COMPILED || it->status == FT_PLAN_OVER_LIMITS)
        printf(", \"registers\": %d, \"spill_stores\": %lld, \"spill_loads\": %lld, "
               "\"stack_frame\": %lld, \"smem_static\": %lld",
               it->report.registers, it->report.spill_stores, it->report.spill_loads,
               it->report.stack_frame, it->report.smem_static);
    if (it->smem_dynamic >= 0)
        printf(", \"smem_dynamic\": %lld", it->smem_dynamic);
    if (it->status != FT_PLAN_PRUNED && it->status != FT_PLAN_NOT_SAMPLED)
        printf(", \"compile_ms\": %.1f, \"cache_hit\": %s", it->compile_ms, it->cache_hit ? "true" : "false");
    printf("}\n");
    fflush(stdout);
}

static void print_json_items(const ft_plan *plan, ft_plan_status status)
{
    int i;

    for (i = 0; i < plan->nitems; i++)
        if (plan->items[i].status == status)
            print_json_item(&plan->items[i]);
}

static void print_json_summary(const ft_plan *plan, const ft_plan_sample_info *sample, long long seed,
                               const ft_cache *cache, double wall_ms)
{
    printf("{\"kind\": \"summary\", \"variants\": %d, \"compiled\": %d, \"pruned\": %d, "
           "\"compile_errors\": %d, \"over_limits\": %d, \"wall_ms\": %.1f",
           plan->nitems + plan->count[FT_PLAN_PRUNED], plan->count[FT_PLAN_COMPILED], plan->count[FT_PLAN_PRUNED],
           plan->count[FT_PLAN_COMPILE_ERROR], plan->count[FT_PLAN_OVER_LIMITS], wall_ms);
    if (cache != NULL) {
        ft_cache_stats s = ft__cache_stats(cache);
        printf(", \"cache_hits\": %lld, \"cache_misses\": %lld, \"cache_corrupt\": %lld", s.hits, s.misses,
               s.corrupt);
    }
    if (sample != NULL) {
        printf(", \"not_sampled\": %d, \"sample\": {\"seed\": %lld, \"kept\": %d, \"sampled\": %d, "
               "\"values\": %d, \"uncovered\": %d, \"missing\": ",
               plan->count[FT_PLAN_NOT_SAMPLED], seed, sample->kept, sample->sampled, sample->values,
               sample->uncovered);
        ft__json_string(stdout, sample->missing);
        printf("}");
    }
    printf("}\n");
}

static int parse_args(int argc, char **argv, plan_opts *o)
{
    static const struct option longopts[] = {
        {"arch", required_argument, NULL, 'a'},  {"jobs", required_argument, NULL, 'j'},
        {"only", required_argument, NULL, 'o'},  {"json", no_argument, NULL, 'J'},
        {"cache-dir", required_argument, NULL, 'c'}, {"no-cache", no_argument, NULL, 'N'},
        {"quiet", no_argument, NULL, 'q'},       {"help", no_argument, NULL, 'h'},
        {"sample", required_argument, NULL, 's'}, {"seed", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0}};
    int ch;
    long v;

    memset(o, 0, sizeof *o);
    o->arch = "sm_90";
    optind = 1;
    while ((ch = getopt_long(argc, argv, "j:qh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'a': o->arch = optarg; break;
        case 'j':
            if (!cli_parse_int("plan", "--jobs", optarg, 1, 1024, &v))
                return EXIT_USAGE;
            o->jobs = (int)v;
            break;
        case 'o': o->only = optarg; break;
        case 's':
            if (!cli_parse_int("plan", "--sample", optarg, 1, FT_MAX_VARIANTS, &v))
                return EXIT_USAGE;
            o->sample = (int)v;
            break;
        case 'S':
            if (!cli_parse_int("plan", "--seed", optarg, 0, 2147483647L, &v))
                return EXIT_USAGE;
            o->seed = v;
            break;
        case 'J': o->json = 1; break;
        case 'c': o->cache_dir = optarg; break;
        case 'N': o->no_cache = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h': fputs(usage, stdout); return -1;
        default: return cli_usage_error("plan", "bad option");
        }
    }
    if (optind < argc - 1)
        return cli_usage_error("plan", "expected one spec file, got %d arguments", argc - optind);
    o->spec_path = optind < argc ? argv[optind] : NULL; /* NULL: the built-in default */
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts o;
    ft_err err;
    ft_spec *spec = NULL;
    ft_plan *plan = NULL;
    ft_cache *cache = NULL;
    ft_arch arch;
    ft_variant filter;
    ft_plan_sample_info sample;
    unsigned mask = 0;
    progress_ctx pc = {0};
    static pruned_rows pr; /* (16 KB of reason classes: not on the stack) */
    volatile int *stop;
    double t0, nvrtc_ms = 0;
    int status = 1;
    int i;

    i = parse_args(argc, argv, &o);
    if (i != 0)
        return i < 0 ? 0 : i;
    if (o.jobs == 0)
        o.jobs = ft__cpu_count();
    t0 = ft__now_ms();
    if (ft__arch_builtin(o.arch, &arch, &err) != FT_OK) {
        status = cli_fail("plan", &err);
        goto out;
    }
    if (ft__spec_load_default(o.spec_path, &spec, &err) != FT_OK) {
        status = cli_fail("plan", &err);
        goto out;
    }
    if (o.only != NULL && (ft__spec_add_values(spec, o.only, &err) != FT_OK ||
                           ft__variant_filter_parse(spec, o.only, &filter, &mask, &err) != FT_OK)) {
        status = cli_fail("plan", &err);
        goto out;
    }
    pr.json = o.json;
    pr.width = variant_width(spec, &filter, mask);
    pr.variants = matching_variants(spec, mask);
    if (ft__plan_build_streamed(spec, &arch, &filter, mask, on_pruned, &pr, &plan, &err) != FT_OK) {
        status = cli_fail("plan", &err);
        goto out;
    }
    if (plan->nitems == 0 && plan->count[FT_PLAN_PRUNED] == 0) {
        fprintf(stderr, "flashtune plan: no variant of %s matches '%s'\n", spec->path, o.only);
        goto out;
    }
    if (plan->count[FT_PLAN_PENDING] == 0) {
        if (o.json)
            print_json_summary(plan, NULL, o.seed, NULL, ft__now_ms() - t0);
        else
            print_reasons(plan, &pr, FT_PLAN_PRUNED, "pruned");
        fprintf(stderr, "flashtune plan: all %d variants of %s are pruned for %s; nothing to compile\n",
                plan->count[FT_PLAN_PRUNED], spec->path, arch.name);
        goto out;
    }
    start_output(&pr, plan); /* (where nothing was pruned) */
    if (o.sample > 0 && ft__plan_sample(plan, o.sample, (unsigned long long)o.seed, &sample, &err) != FT_OK) {
        status = cli_fail("plan", &err);
        goto out;
    }
    if (!o.no_cache && ft__cache_open(o.cache_dir, &cache, &err) != FT_OK) {
        status = cli_fail("plan", &err);
        goto out;
    }
    if (o.json && o.sample > 0)
        print_json_items(plan, FT_PLAN_NOT_SAMPLED);
    pc.json = o.json;
    stop = cli_stop_flag();
    cli_progress_start(&pc.bar, "compiling", plan->count[FT_PLAN_PENDING], o.quiet);
    if (ft__plan_compile(plan, cache, o.jobs, on_progress, &pc, stop, &err) != FT_OK) {
        cli_progress_finish(&pc.bar);
        status = cli_fail("plan", &err);
        goto out;
    }
    cli_progress_finish(&pc.bar);
    for (i = 0; i < plan->nitems; i++)
        if (!plan->items[i].cache_hit)
            nvrtc_ms += plan->items[i].compile_ms;
    if (o.json)
        print_json_summary(plan, o.sample > 0 ? &sample : NULL, o.seed, cache, ft__now_ms() - t0);
    else {
        print_table(plan, pr.width);
        print_summary(plan, &pr, o.sample > 0 ? &sample : NULL, o.seed, cache, ft__now_ms() - t0, nvrtc_ms,
                      o.jobs);
    }
    status = plan->count[FT_PLAN_COMPILE_ERROR] > 0 ? 1 : 0;
out:
    ft__plan_free(plan);
    ft__spec_free(spec);
    ft__cache_close(cache);
    return status;
}
