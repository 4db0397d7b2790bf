/* flashtune devices, flashtune run: the GPU side of the command. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/json.h"
#include "generator/family.h"
#include "generator/variant.h"
#include "ops/op.h"
#include "runtime/timing.h"
#include "runtime/session.h"

static const char devices_usage[] =
    "usage: flashtune devices [--gpus-only] [--db PATH] [--json]\n"
    "\n"
    "Lists the GPUs the driver reports (with the ordinal --device takes) and the devices\n"
    "recorded in the tuning database.\n"
    "\n"
    "  --gpus-only        only the GPUs, and exit status 1 when there is none (--gpu is the\n"
    "                     earlier spelling)\n"
    "  --db PATH          tuning database (default: as for tune)\n"
    "  --json             JSON lines: one per GPU (\"kind\": \"gpu\"), one per recorded device\n"
    "                     (\"kind\": \"database\"), and {\"kind\": \"driver\", ...} first\n";

int cmd_devices(int argc, char **argv)
{
    const char *db_path = NULL;
    int gpu_only = 0, json = 0, count = 0, i;
    const ft_cuda *cu;
    ft_err err;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpus-only") == 0 || strcmp(argv[i], "--gpu") == 0)
            gpu_only = 1;
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            db_path = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(devices_usage, stdout);
            return 0;
        } else
            return cli_usage_error("devices", "unknown argument '%s'", argv[i]);
    }
    if (ft__cuda_load(&cu, &err) != FT_OK) {
        if (json) {
            printf("{\"kind\": \"driver\", \"gpus\": 0, \"error\": ");
            ft__json_string(stdout, err.msg);
            printf("}\n");
        } else {
            printf("GPUs: none (%s)\n", err.msg);
        }
        if (gpu_only)
            return 1;
    } else {
        cu->p_cuDeviceGetCount(&count);
        if (json)
            printf("{\"kind\": \"driver\", \"driver\": %d, \"gpus\": %d}\n", cu->driver_version, count);
        else
            printf("GPUs: CUDA driver %d.%d, %d GPU%s\n", cu->driver_version / 1000, cu->driver_version % 1000 / 10,
                   count, count == 1 ? "" : "s");
        for (i = 0; i < count; i++) {
            ft_arch a;
            if (ft__cuda_device_arch(cu, i, &a, &err) != FT_OK) {
                fprintf(stderr, "flashtune devices: GPU %d: %s\n", i, err.msg);
                return 1;
            }
            if (json) {
                printf("{\"kind\": \"gpu\", \"ordinal\": %d, \"name\": ", i);
                ft__json_string(stdout, a.device_name);
                printf(", \"cc\": %d, \"arch\": \"%s\", \"sms\": %d, \"smem_per_block\": %lld}\n", a.cc, a.name, a.sms,
                       a.smem_per_block);
            } else {
                printf("  %d: %s, compute capability %d.%d (%s), %d SMs, %lld KiB shared memory per block\n", i,
                       a.device_name, a.cc / 10, a.cc % 10, a.name, a.sms, a.smem_per_block / 1024);
            }
        }
    }
    if (gpu_only)
        return 0;
    return cli_print_db_devices(db_path, json);
}

static const char run_usage[] =
    "usage: flashtune run --variant STR --shape STR [options]\n"
    "\n"
    "Compiles (or takes from the cache) one variant, verifies it on random inputs against the\n"
    "reference, then times it with CUDA events and prints milliseconds, TFLOP/s (forward FLOPs\n"
    "4·b·hq·sq·sk·d, halved when causal) and the verification error. Needs a GPU.\n"
    "\n"
    "  --variant STR     the variant ('flashtune plan' prints them); causal and dtype may be\n"
    "                    left out and given by the options below\n"
    "  --shape STR       b=4,hq=16,hkv=16,sq=4096,sk=4096,d=128 (hkv and sk default to hq, sq)\n"
    "  --causal          bottom-right causal mask\n"
    "  --dtype f16|bf16  element type (default f16; fp16, float16, half and bfloat16 too)\n"
    "  --layout L        bshd (default), bhsd, or qkv (one packed [b, s, 3, h, d] buffer)\n"
    "  --spec FILE       the spec the variant belongs to (default: the built-in flash_fwd)\n"
    "  --device N|NAME   GPU ordinal, or the first GPU whose name contains NAME (default 0)\n"
    "  --seed N          random inputs' seed (default 1)\n"
    "  --no-verify       time without verifying first\n"
    "  --no-time         verify only (e.g. under compute-sanitizer)\n"
    "  --heat MS         GPU time the kernel runs before its timing (default 2000: a GPU at its\n"
    "                    power limit runs a few per cent faster in its first second of load than\n"
    "                    under sustained load; 0: none)\n"
    "  --budget MS       kernel time the timed repetitions take (default 200)\n"
    "  --json            print JSON\n"
    "  --cache-dir DIR   compile cache\n";

/* Completes a partial variant string with causal and dtype from the options. */
static ft_status resolve_variant(ft_spec *spec, const char *text, int causal_flag, const char *dtype_flag,
                                 ft_variant *v, ft_err *err)
{
    char full[1024];
    ft_variant partial;
    unsigned mask;
    int ci = ft__spec_param_index(spec, "causal");
    int di = ft__spec_param_index(spec, "dtype");
    ft_status rc;

    rc = ft__spec_add_values(spec, text, err);
    if (rc == FT_OK)
        rc = ft__variant_filter_parse(spec, text, &partial, &mask, err);
    if (rc != FT_OK)
        return rc;
    snprintf(full, sizeof full, "%s", text);
    if (ci >= 0) {
        if (!(mask & (1u << ci)))
            snprintf(full + strlen(full), sizeof full - strlen(full), ",causal=%d", causal_flag > 0);
        else if (causal_flag >= 0 && spec->params[ci].ints[partial.idx[ci]] != causal_flag)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "--causal disagrees with the variant's causal=%lld",
                            spec->params[ci].ints[partial.idx[ci]]);
    }
    if (di >= 0) {
        if (!(mask & (1u << di)))
            snprintf(full + strlen(full), sizeof full - strlen(full), ",dtype=%s", dtype_flag ? dtype_flag : "f16");
        else if (dtype_flag != NULL && strcmp(spec->params[di].strings[partial.idx[di]], dtype_flag) != 0)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "--dtype %s disagrees with the variant's dtype=%s",
                            dtype_flag, spec->params[di].strings[partial.idx[di]]);
    }
    return ft__variant_parse(spec, full, v, err);
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"variant", required_argument, NULL, 'v'}, {"shape", required_argument, NULL, 's'},
        {"causal", no_argument, NULL, 'c'},        {"dtype", required_argument, NULL, 't'},
        {"layout", required_argument, NULL, 'l'},  {"spec", required_argument, NULL, 'S'},
        {"device", required_argument, NULL, 'd'},  {"seed", required_argument, NULL, 'r'},
        {"no-verify", no_argument, NULL, 'n'},     {"no-time", no_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'J'},          {"heat", required_argument, NULL, 'H'},
        {"budget", required_argument, NULL, 'B'},
        {"cache-dir", required_argument, NULL, 'C'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *variant = NULL, *shape = NULL, *dtype = NULL, *spec_path = NULL, *cache_dir = NULL;
    int causal = -1, verify = 1, time_it = 1, json = 0, ch, status = 1;
    long device = 0, seed = 1, heat = (long)FT_SETTLE_MS, budget = 0;
    ft_layout layout = FT_LAYOUT_BSHD;
    ft_session s;
    ft_spec *spec = NULL;
    ft_variant v;
    ft_problem p;
    ft_tensors t;
    ft_kernel k;
    ft_check check;
    ft_timing timing;
    ft_timing_opts topts;
    ft_resource_report report;
    ft_fwd_launch lc;
    ft_err err;
    char vs[512], ps[128];
    double tflops;

    memset(&s, 0, sizeof s);
    memset(&t, 0, sizeof t);
    memset(&k, 0, sizeof k);
    memset(&p, 0, sizeof p);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'v': variant = optarg; break;
        case 's': shape = optarg; break;
        case 'c': causal = 1; break;
        case 't': dtype = optarg; break;
        case 'l':
            if (!ft__layout_parse(optarg, &layout))
                return cli_usage_error("run", "--layout takes bshd, bhsd or qkv, not '%s'", optarg);
            break;
        case 'S': spec_path = optarg; break;
        case 'd': {
            int d, st;
            if (!cli_parse_device("run", optarg, 0, &d, &st))
                return st;
            device = d;
            break;
        }
        case 'r':
            if (!cli_parse_int("run", "--seed", optarg, 0, 1L << 30, &seed))
                return EXIT_USAGE;
            break;
        case 'n': verify = 0; break;
        case 'T': time_it = 0; break;
        case 'J': json = 1; break;
        case 'H':
            if (!cli_parse_int("run", "--heat", optarg, 0, 60000, &heat))
                return EXIT_USAGE;
            break;
        case 'B':
            if (!cli_parse_int("run", "--budget", optarg, 1, 60000, &budget))
                return EXIT_USAGE;
            break;
        case 'C': cache_dir = optarg; break;
        case 'h': fputs(run_usage, stdout); return 0;
        default: return cli_usage_error("run", "bad option");
        }
    }
    if (optind != argc)
        return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
    if (variant == NULL || shape == NULL)
        return cli_usage_error("run", "--variant and --shape are required");
    if (dtype != NULL && ft__dtype_name(dtype) == NULL)
        return cli_usage_error("run", "--dtype takes f16 (fp16, float16, half) or bf16 (bfloat16), not '%s'", dtype);
    if (dtype != NULL)
        dtype = ft__dtype_name(dtype);
    p.layout = layout;
    if (ft__problem_parse(shape, &p, &err) != FT_OK || ft__spec_load_default(spec_path, &spec, &err) != FT_OK ||
        ft__spec_check_op(spec, &ft__op_fwd, "run measures", &err) != FT_OK ||
        resolve_variant(spec, variant, causal, dtype, &v, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    ft__variant_format(spec, &v, vs, sizeof vs);
    {
        ft_problem vp = p;
        ft__variant_problem(spec, &v, &vp);
        if (vp.head_dim != p.head_dim) {
            fprintf(stderr, "flashtune run: the shape's d=%d differs from the variant's d=%d\n", p.head_dim,
                    vp.head_dim);
            goto out;
        }
        p = vp;
    }
    if (ft__problem_validate(&p, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    if (ft__session_open((int)device, cache_dir, 1, &s, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    if (ft__session_build(&s, spec, &v, &k, &report, &err) != FT_OK ||
        ft__tensors_create(s.cu, &p, &t, &err) != FT_OK ||
        ft__tensors_fill(&s.verifier, &t, (uint64_t)seed, 1.f, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    memset(&check, 0, sizeof check);
    if (verify && ft__verify_kernel(&s.verifier, &k, &t, &check, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    if (verify && !check.pass) {
        fprintf(stderr, "flashtune run: %s FAILS verification on %s: %s\n", vs, shape, check.detail);
        goto out;
    }
    if (!time_it) {
        printf("verify   %s on %s: pass: O relative L2 %.2e, LSE max error %.2e\n", vs, shape, check.o_rel_l2,
               check.lse_max_err);
        status = 0;
        goto out;
    }
    lc.cu = s.cu;
    lc.k = &k;
    ft__timing_opts_default(&topts);
    topts.heat_ms = (double)heat; /* the GPU idled while the kernel compiled: time it at its sustained clock */
    if (budget > 0)
        topts.budget_ms = (double)budget;
    if (ft__tensors_workspace(s.cu, &t, &k, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    ft__tensors_params(&t, &lc.params);
    if (ft__time(s.cu, ft__fwd_launch_fn, &lc, &topts, &timing, &err) != FT_OK) {
        status = cli_fail("run", &err);
        goto out;
    }
    tflops = ft__op_fwd.flops(&p) / (timing.median_ms * 1e-3) / 1e12;
    ft__problem_format(&p, ps, sizeof ps);
    if (json) {
        printf("{\"variant\": ");
        ft__json_string(stdout, vs);
        printf(", \"shape\": \"%s\", \"causal\": %d, \"dtype\": \"%s\", \"layout\": \"%s\", \"device\": ", ps,
               p.causal, p.bf16 ? "bf16" : "f16", ft__layout_name(p.layout));
        ft__json_string(stdout, s.arch.device_name);
        printf(", \"registers\": %d, \"local_bytes\": %d, \"smem\": %lld, \"blocks_per_sm\": %d, "
               "\"median_ms\": %.5f, \"q1_ms\": %.5f, \"q3_ms\": %.5f, \"reps\": %d, \"tflops\": %.2f",
               k.registers, k.local_bytes, k.smem_static + k.facts.smem_dynamic, k.blocks_per_sm, timing.median_ms,
               timing.q1_ms, timing.q3_ms, timing.reps, tflops);
        if (verify)
            printf(", \"o_rel_l2\": %.3g, \"o_max_abs\": %.3g, \"lse_max_err\": %.3g", check.o_rel_l2,
                   check.o_max_abs, check.lse_max_err);
        printf("}\n");
    } else {
        printf("variant  %s\n", vs);
        printf("device   %s (%s, %d SMs)\n", s.arch.device_name, s.arch.name, s.arch.sms);
        printf("shape    %s, causal=%d, %s, layout %s\n", ps, p.causal, p.bf16 ? "bf16" : "f16",
               ft__layout_name(p.layout));
        printf("kernel   %d registers, %d B local, %lld B shared, %d block%s per SM\n", k.registers, k.local_bytes,
               k.smem_static + k.facts.smem_dynamic, k.blocks_per_sm, k.blocks_per_sm == 1 ? "" : "s");
        if (verify)
            printf("verify   pass: O relative L2 %.2e, max |error| %.2e; LSE max error %.2e\n", check.o_rel_l2,
                   check.o_max_abs, check.lse_max_err);
        printf("time     %.4f ms median (quartiles %.4f-%.4f, %d runs), %.1f TFLOP/s\n", timing.median_ms,
               timing.q1_ms, timing.q3_ms, timing.reps, tflops);
    }
    status = 0;
out:
    if (s.cu != NULL) {
        ft__tensors_destroy(s.cu, &t);
        ft__kernel_unload(s.cu, &k);
    }
    ft__session_close(&s);
    ft__spec_free(spec);
    return status;
}
