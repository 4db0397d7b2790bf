/* flashtune tune, and the worker it starts (flashtune worker). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/fs.h"
#include "common/json.h"
#include "runtime/driver.h"
#include "tuner/tune.h"

static const char usage[] =
    "usage: flashtune tune [SPEC...] [options]\n"
    "\n"
    "For the present GPU, measures every variant of the specs (default: the built-in flash_fwd,\n"
    "and flash_fwd_sm90 on compute capability 9.0) on every workload bucket they name: compile (all cores), load, verify against the\n"
    "reference on the bucket's shape, time with CUDA events, record. Every measurement is kept\n"
    "in the tuning database; near-ties among the fastest are re-measured interleaved. A kernel\n"
    "that faults or hangs is recorded as such and tuning goes on; an interrupted tune resumes\n"
    "where it stopped. Without a GPU it says so and runs a compile-only plan instead.\n"
    "\n"
    "  --db PATH         tuning database (default $FLASHTUNE_DB, else\n"
    "                    $XDG_DATA_HOME/flashtune/tuning.db or ~/.local/share/flashtune/tuning.db)\n"
    "  --device N|NAME|all  GPU ordinal, or the first GPU whose name contains NAME (default 0);\n"
    "                    all: share the buckets among identical GPUs\n"
    "  --only FILTER     only the variants matching, e.g. 'd=128,causal=1'\n"
    "  -j, --jobs N      parallel compilations (default: the number of cores)\n"
    "  --budget MS       timing budget per measurement (default 30)\n"
    "  --search HOW      ranked (default), halving or exhaustive (every variant at the whole\n"
    "                    budget: the oracle the others are checked against); halving: every\n"
    "                    variant at a quarter of it (5 ms at least), the fastest quarter of each\n"
    "                    bucket's (4 at least) again at the whole budget; ranked: halving over the\n"
    "                    candidates of each group of buckets (same head dim, dtype, causality),\n"
    "                    only those compiled: the variants fastest in a measured twin group (one\n"
    "                    of dtype, determinism, causality different) or, without one, 16 near\n"
    "                    and far from the built-in defaults, then their best ones' neighbours;\n"
    "                    the buckets between a group's smallest and largest screen only the 8\n"
    "                    fastest of their measured neighbours, and a bucket whose twin of its\n"
    "                    causality measured its shape only that one's 4 fastest; buckets that a\n"
    "                    newer family's spec has a variant for are left to it\n"
    "  --remeasure       measure again what the database already has\n"
    "  --one-shape       leaders within the noise of their interleaved rounds are not raced again\n"
    "                    on a second shape of the bucket (11/16 of its sequence length): the\n"
    "                    fastest median on the bucket's own shape wins (a shorter tune)\n"
    "  --prefetch-wait own|all\n"
    "                    ranked: before a refinement's or a twin group's compilation, wait only for\n"
    "                    that group's compilations queued ahead, moved to the front while the rest\n"
    "                    compile on (own, the default), or for every one queued (all)\n"
    "  --refinements N   ranked: how many times a group no twin informs is refined at most (0 to\n"
    "                    4, default 2); 1 took about 40 % fewer measurements than 2 in replays of\n"
    "                    GPU data, its winners 0.1-0.4 % slower on average\n"
    "  --timeline FILE   where the tune's time went: one JSON line per span of work (a group's\n"
    "                    compilation and the wait for it, a compilation ahead, the wait for those,\n"
    "                    a group's measurements, its held races), seconds from the tune's start\n"
    "  --misses          instead of the specs' workloads, the buckets that applications ran\n"
    "                    without a tuned winner on this GPU model (recorded with\n"
    "                    FLASHTUNE_RECORD_MISSES=1; flashtune query --misses lists them)\n"
    "  --timeout S       seconds a measurement may take before the kernel counts as hung (60)\n"
    "  --arch NAME       target of the compile-only plan when there is no GPU (default sm_90)\n"
    "  --cache-dir DIR   compile cache\n"
    "  --json            the summary as one JSON line on stdout instead of the text (without a\n"
    "                    GPU: a line {\"kind\": \"tune\", \"gpu\": false, ...}, then plan's JSON lines)\n"
    "  -q, --quiet       no progress display\n";

typedef struct tune_progress {
    cli_progress bar;
    int started;
    int quiet;
} tune_progress;

static void on_progress(void *ud, long long done, long long total, const char *what)
{
    tune_progress *tp = ud;
    if (strcmp(what, "compiling") == 0) {
        if (!tp->quiet)
            fprintf(stderr, "tune: compiling %lld variants\n", total);
        return;
    }
    if (!tp->started) {
        cli_progress_start(&tp->bar, "measuring", (int)total, tp->quiet);
        tp->started = 1;
    }
    tp->bar.total = (int)total; /* it grows as each group of buckets has compiled */
    cli_progress_update(&tp->bar, (int)done, what);
}

/* --json: the run's summary in one line (times in milliseconds). */
static const char *const search_names[] = {"exhaustive", "halving", "ranked"};

static void print_json_summary(const ft_tune_summary *s, int misses, ft_search search)
{
    int i;

    printf("{\"kind\": \"summary\", \"device\": ");
    ft__json_string(stdout, s->device_name);
    printf(", \"database\": ");
    ft__json_string(stdout, s->db_path);
    if (misses)
        printf(", \"misses\": %d, \"misses_invalid\": %d", s->misses, s->misses_invalid);
    printf(", \"search\": \"%s\"", search_names[search]);
    if (search != FT_SEARCH_EXHAUSTIVE)
        printf(", \"screened\": %lld, \"kept\": %lld", s->screened, s->kept);
    if (search == FT_SEARCH_RANKED)
        printf(", \"ranked_out\": %d, \"left_to_newer\": %d, \"prefetched\": %d, \"prefetch_ms\": %.1f, "
               "\"prefetch_wait_ms\": %.1f",
               s->ranked_out, s->left_to_newer, s->prefetched, s->prefetch_ms, s->prefetch_wait_ms);
    printf(", \"buckets\": %d, \"variants\": %d, \"pruned\": %d, \"measured\": %lld, \"resumed\": %lld, "
           "\"results\": {",
           s->buckets, s->variants, s->pruned, s->measured, s->resumed);
    for (i = FT_RESULT_OK; i <= FT_RESULT_TIMEOUT; i++)
        printf("%s\"%s\": %lld", i > FT_RESULT_OK ? ", " : "", ft__result_status_name((ft_result_status)i),
               s->by_status[i]);
    printf("}, \"winners\": %d, \"races\": %d, \"ties\": %d, \"decided\": %d, \"worker_restarts\": %d, \"protocol_errors\": %d, "
           "\"wall_ms\": %.1f, \"compile_ms\": %.1f, \"compile_wait_ms\": %.1f, \"verify_ms\": %.1f, "
           "\"time_ms\": %.1f, \"setup_ms\": %.1f, \"measure_ms\": %.1f, \"race_ms\": %.1f, \"interrupted\": %s",
           s->winners, s->races, s->ties, s->decided, s->worker_restarts, s->protocol_errors, s->wall_ms, s->compile_ms, s->compile_wait_ms,
           s->verify_ms, s->time_ms, s->setup_ms, s->measure_ms, s->race_ms, s->interrupted ? "true" : "false");
    printf(", \"over_default\": {\"races\": %d", s->over_default);
    if (s->over_default > 0)
        printf(", \"geomean\": %.4f, \"min\": %.4f, \"max\": %.4f", exp(s->over_default_log / s->over_default),
               s->over_default_min, s->over_default_max);
    printf("}}\n");
}

int cmd_tune(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'D'},     {"device", required_argument, NULL, 'd'},
        {"only", required_argument, NULL, 'o'},   {"jobs", required_argument, NULL, 'j'},
        {"budget", required_argument, NULL, 'b'}, {"remeasure", no_argument, NULL, 'R'},
        {"arch", required_argument, NULL, 'a'},   {"cache-dir", required_argument, NULL, 'C'},
        {"quiet", no_argument, NULL, 'q'},        {"timeout", required_argument, NULL, 'T'},
        {"misses", no_argument, NULL, 'M'},       {"json", no_argument, NULL, 'J'},
        {"search", required_argument, NULL, 'S'}, {"one-shape", no_argument, NULL, 'O'},
        {"prefetch-wait", required_argument, NULL, 'P'}, {"timeline", required_argument, NULL, 'L'},
        {"refinements", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    ft_tune_opts o;
    ft_tune_summary s;
    ft_spec *specs[16];
    int nspecs = 0, ch, status = 1, i, json = 0;
    long v;
    const char *arch = "sm_90";
    tune_progress tp;
    ft_err err;
    char a[32], b[32], c[32], cw[32], w[32];

    memset(&o, 0, sizeof o);
    memset(&tp, 0, sizeof tp);
    o.budget_ms = 30;
    o.timeout_s = 60;
    o.search = FT_SEARCH_RANKED; /* within 2 % of the exhaustive oracle on the sample of bench/tune_quality.py */
    o.refinements = FT_TUNE_RANK_ROUNDS;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "j:qh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'D': o.db_path = optarg; break;
        case 'd': {
            int d, st;
            if (!cli_parse_device("tune", optarg, 1, &d, &st))
                return st;
            if (d > 63)
                return cli_usage_error("tune", "--device takes a GPU ordinal from 0 to 63, not %d", d);
            o.device = d;
            break;
        }
        case 'o': o.only = optarg; break;
        case 'j':
            if (!cli_parse_int("tune", "--jobs", optarg, 1, 1024, &v))
                return EXIT_USAGE;
            o.jobs = (int)v;
            break;
        case 'b':
            if (!cli_parse_int("tune", "--budget", optarg, 1, 10000, &v))
                return EXIT_USAGE;
            o.budget_ms = (int)v;
            break;
        case 'R': o.remeasure = 1; break;
        case 'O': o.one_shape = 1; break;
        case 'P':
            if (strcmp(optarg, "all") != 0 && strcmp(optarg, "own") != 0)
                return cli_usage_error("tune", "--prefetch-wait takes all or own, not '%s'", optarg);
            o.prefetch_all = strcmp(optarg, "all") == 0;
            break;
        case 'L': o.timeline_path = optarg; break;
        case 'r':
            if (!cli_parse_int("tune", "--refinements", optarg, 0, FT_TUNE_RANK_ROUNDS_MAX, &v))
                return EXIT_USAGE;
            o.refinements = (int)v;
            break;
        case 'M': o.misses = 1; break;
        case 'S':
            for (i = 0; i < 3 && strcmp(optarg, search_names[i]) != 0; i++)
                ;
            if (i == 3)
                return cli_usage_error("tune", "--search takes exhaustive, halving or ranked, not '%s'", optarg);
            o.search = (ft_search)i;
            break;
        case 'J': json = 1; break;
        case 'T':
            if (!cli_parse_int("tune", "--timeout", optarg, 1, 86400, &v))
                return EXIT_USAGE;
            o.timeout_s = (double)v;
            break;
        case 'a': arch = optarg; break;
        case 'C': o.cache_dir = optarg; break;
        case 'q': o.quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_usage_error("tune", "bad option");
        }
    }
    o.worker_cmd = getenv("FLASHTUNE_WORKER"); /* a stand-in worker, for tests */
    if (o.worker_cmd != NULL && o.worker_cmd[0] == '\0')
        o.worker_cmd = NULL;
    if (o.worker_cmd == NULL) {
        const ft_cuda *cu;
        if (ft__cuda_load(&cu, &err) != FT_OK) {
            /* No GPU: say so in one line (--json: a JSON line, then plan's), then do what can be
             * done without one. */
            char *pargv[10];
            int pargc = 0;
            if (json) {
                printf("{\"kind\": \"tune\", \"gpu\": false, \"reason\": ");
                ft__json_string(stdout, err.msg);
                printf(", \"compile_only_arch\": \"%s\"}\n", arch);
            } else {
                printf("tune: %s; running a compile-only plan for %s instead\n", err.msg, arch);
            }
            fflush(stdout);
            pargv[pargc++] = "plan";
            if (optind < argc)
                pargv[pargc++] = argv[optind];
            pargv[pargc++] = "--arch";
            pargv[pargc++] = (char *)arch;
            if (o.only != NULL) {
                pargv[pargc++] = "--only";
                pargv[pargc++] = (char *)o.only;
            }
            if (o.quiet)
                pargv[pargc++] = "-q";
            if (json)
                pargv[pargc++] = "--json";
            pargv[pargc] = NULL;
            return cmd_plan(pargc, pargv);
        }
    }
    for (i = optind; i < argc; i++) {
        if (nspecs == 16) {
            fprintf(stderr, "flashtune tune: at most 16 specs\n");
            goto out;
        }
        if (ft__spec_load_default(argv[i], &specs[nspecs], &err) != FT_OK) {
            status = cli_fail("tune", &err);
            goto out;
        }
        nspecs++;
    }
    if (nspecs == 0) { /* the built-in specs, each where its kernels can run */
        while (nspecs < 16 && ft__builtin_specs[nspecs].name != NULL) {
            if (ft__spec_load_builtin(nspecs, &specs[nspecs], &err) != FT_OK) {
                status = cli_fail("tune", &err);
                goto out;
            }
            nspecs++;
        }
        o.skip_unsupported = 1;
    }
    o.stop = cli_stop_flag();
    tp.quiet = o.quiet;
    if (ft__tune(specs, nspecs, &o, on_progress, &tp, &s, &err) != FT_OK) {
        if (tp.started)
            cli_progress_finish(&tp.bar);
        status = cli_fail("tune", &err);
        if (err.code == FT_ERR_INTERRUPTED) {
            fprintf(stderr, "flashtune tune: what was measured is in %s; run tune again to go on\n",
                    s.db_path[0] ? s.db_path : "the database");
            if (json) /* where the time went, so far */
                print_json_summary(&s, o.misses, o.search);
        }
        goto out;
    }
    if (tp.started)
        cli_progress_finish(&tp.bar);
    if (json) {
        print_json_summary(&s, o.misses, o.search);
        status = 0;
        goto out;
    }
    if (o.misses && s.misses == 0) {
        if (s.misses_invalid > 0)
            printf("tune: no valid misses recorded for %s in %s (%d skipped for an invalid shape): nothing to "
                   "tune\n",
                   s.device_name, s.db_path, s.misses_invalid);
        else
            printf("tune: no misses recorded for %s in %s: nothing to tune\n", s.device_name, s.db_path);
        status = 0;
        goto out;
    }
    if (o.misses && s.misses_invalid > 0)
        printf("tune: %d missed buckets of %s (%d recorded misses skipped for an invalid shape)\n", s.misses,
               s.device_name, s.misses_invalid);
    else if (o.misses)
        printf("tune: %d missed buckets of %s\n", s.misses, s.device_name);
    cli_format_duration(s.compile_ms, a, sizeof a);
    cli_format_duration(s.verify_ms, b, sizeof b);
    cli_format_duration(s.time_ms, c, sizeof c);
    cli_format_duration(s.wall_ms, w, sizeof w);
    printf("tuned %s: %d buckets, %d variants (%d pruned)\n", s.device_name, s.buckets, s.variants, s.pruned);
    printf("measured %lld, already in the database %lld: %lld ok, %lld wrong result, %lld compile error, "
           "%lld over limits, %lld launch failure, %lld fault, %lld timeout\n",
           s.measured, s.resumed, s.by_status[FT_RESULT_OK], s.by_status[FT_RESULT_WRONG_RESULT],
           s.by_status[FT_RESULT_COMPILE_ERROR], s.by_status[FT_RESULT_OVER_LIMITS],
           s.by_status[FT_RESULT_LAUNCH_FAILURE], s.by_status[FT_RESULT_FAULT], s.by_status[FT_RESULT_TIMEOUT]);
    printf("winners: %d buckets (%d races of the leaders, runner-up and default, interleaved; %d within the measured "
           "noise raced again on a neighbouring shape, which decided %d); worker restarts: %d; protocol errors: %d\n",
           s.winners, s.races, s.ties, s.decided, s.worker_restarts, s.protocol_errors);
    if (s.over_default > 0)
        printf("against the built-in default, raced beside the winner in %d races: %.3fx as fast (geometric mean; "
               "%.3f-%.3f)\n",
               s.over_default, exp(s.over_default_log / s.over_default), s.over_default_min, s.over_default_max);
    if (o.search != FT_SEARCH_EXHAUSTIVE)
        printf("search: %s: %lld variants screened, %lld of them measured again at the whole budget\n",
               search_names[o.search], s.screened, s.kept);
    if (o.search == FT_SEARCH_RANKED)
        printf("ranked: %d variants not compiled (ranked below the candidates); %d buckets left to a newer "
               "family's spec; %d variants compiled ahead (%.1fs of NVRTC, %.1fs waited for)\n",
               s.ranked_out, s.left_to_newer, s.prefetched, s.prefetch_ms / 1e3, s.prefetch_wait_ms / 1e3);
    cli_format_duration(s.compile_wait_ms, cw, sizeof cw);
    printf("time: %s wall; compiling %s (%s of it before the GPU could go on), verifying %s, timing %s\n", w, a, cw,
           b, c);
    cli_format_duration(s.setup_ms, a, sizeof a);
    cli_format_duration(s.measure_ms, b, sizeof b);
    cli_format_duration(s.race_ms, c, sizeof c);
    printf("waited for the GPU: %s setting up shapes, %s measuring, %s in the leaders' races\n", a, b, c);
    printf("database: %s  (flashtune query shows the winners)\n", s.db_path);
    status = 0;
out:
    for (i = 0; i < nspecs; i++)
        ft__spec_free(specs[i]);
    return status;
}

int cmd_worker(int argc, char **argv)
{
    long device = 0;
    const char *cache_dir = NULL;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            if (!cli_parse_int("worker", "--device", argv[++i], 0, 63, &device))
                return EXIT_USAGE;
        } else if (strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc)
            cache_dir = argv[++i];
        else
            return cli_usage_error("worker", "the worker is started by 'flashtune tune'");
    }
    return ft__worker_main((int)device, cache_dir);
}
