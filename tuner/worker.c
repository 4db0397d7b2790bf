/*
 * The tuner's worker: one process per GPU that verifies and times kernels for the parent
 * (tuner/tune.c) over a line protocol on stdin/stdout. The GPU work lives here so that a
 * kernel which faults (an illegal address poisons the CUDA context for good) or hangs takes
 * only this process down; the parent records the fault and starts a new worker.
 *
 *   worker -> parent   ready count=N cc=90 sms=132 smem_block=.. smem_sm=.. regs_sm=..
 *                            regs_block=.. threads_block=.. threads_sm=.. l2=.. driver=13000 name=<name>
 *   parent -> worker   shape b=.. hq=.. hkv=.. sq=.. sk=.. d=.. causal=0|1 bf16=0|1 seed=..
 *   worker -> parent   ok  |  error <message>
 *   parent -> worker   measure key=<sha256 hex> entry=<name> threads=.. rows=.. smem=.. verify=0|1 budget=<ms>
 *   worker -> parent   result status=<ok|wrong_result|launch_failure|fault|error> median=.. q1=.. q3=..
 *                            reps=.. l2=.. lse=.. regs=.. local=.. verify_ms=.. time_ms=.. detail=<text>
 *   parent -> worker   quit
 * After a fault the worker answers and exits with status 3.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "runtime/timing.h"
#include "tuner/session.h"
#include "tuner/tune.h"

static int field_int(const char *line, const char *name, long long *out)
{
    char key[40];
    const char *p;
    snprintf(key, sizeof key, " %s=", name);
    p = strstr(line, key);
    if (p == NULL)
        return 0;
    *out = strtoll(p + strlen(key), NULL, 10);
    return 1;
}

static int field_str(const char *line, const char *name, char *out, size_t cap)
{
    char key[40];
    const char *p;
    size_t n;
    snprintf(key, sizeof key, " %s=", name);
    p = strstr(line, key);
    if (p == NULL)
        return 0;
    p += strlen(key);
    n = strcspn(p, " \n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
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

static void one_line(char *s)
{
    for (; *s != '\0'; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
}

int ft__worker_main(int device, const char *cache_dir)
{
    ft_session s;
    ft_tensors t;
    ft_err err;
    char line[4096];
    int have_tensors = 0;
    int count = 0;

    memset(&t, 0, sizeof t);
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
        printf("ready count=%d cc=%d sms=%d smem_block=%lld smem_sm=%lld regs_sm=%d regs_block=%d threads_block=%d "
               "threads_sm=%d l2=%d driver=%d name=%s\n",
               count, s.arch.cc, s.arch.sms, s.arch.smem_per_block, s.arch.smem_per_sm, s.arch.regs_per_sm,
               s.arch.regs_per_block, s.arch.threads_per_block, s.arch.threads_per_sm, l2, s.cu->driver_version,
               s.arch.device_name);
        fflush(stdout);
    }
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (strncmp(line, "quit", 4) == 0)
            break;
        if (strncmp(line, "shape ", 6) == 0) {
            ft_problem p;
            long long v[9] = {0};
            static const char *const names[] = {"b", "hq", "hkv", "sq", "sk", "d", "causal", "bf16", "seed"};
            int i, ok = 1;
            for (i = 0; i < 9; i++)
                ok &= field_int(line, names[i], &v[i]);
            if (have_tensors)
                ft__tensors_destroy(s.cu, &t);
            have_tensors = 0;
            memset(&p, 0, sizeof p);
            p.batch = (int)v[0], p.heads_q = (int)v[1], p.heads_kv = (int)v[2], p.seqlen_q = (int)v[3];
            p.seqlen_k = (int)v[4], p.head_dim = (int)v[5], p.causal = (int)v[6], p.bf16 = (int)v[7];
            if (!ok) {
                printf("error malformed shape command\n");
            } else if (ft__tensors_create(s.cu, &p, &t, &err) != FT_OK ||
                       ft__tensors_fill(&s.verifier, &t, (uint64_t)v[8], 1.f, &err) != FT_OK ||
                       ft__tensors_reference(&s.verifier, &t, &err) != FT_OK) {
                one_line(err.msg);
                printf("error %s\n", err.msg);
            } else {
                have_tensors = 1;
                printf("ok\n");
            }
            fflush(stdout);
            continue;
        }
        if (strncmp(line, "measure ", 8) == 0) {
            char hex[80], entry[256];
            long long threads = 0, rows = 0, smem = 0, verify = 1, budget = 30, tma_kv = 0, balance = 0;
            uint8_t key[32];
            ft_compiled c;
            ft_kernel k;
            ft_check check;
            ft_timing timing;
            ft_timing_opts o;
            ft_fwd_launch lc;
            double t0, t1, t2;
            const char *status = "ok";
            int i, fault = 0;

            memset(&check, 0, sizeof check);
            memset(&timing, 0, sizeof timing);
            memset(&k, 0, sizeof k);
            err.msg[0] = '\0';
            if (!field_str(line, "key", hex, sizeof hex) || strlen(hex) != 64 ||
                !field_str(line, "entry", entry, sizeof entry) || !field_int(line, "threads", &threads) ||
                !field_int(line, "rows", &rows) || !field_int(line, "smem", &smem) || !have_tensors) {
                printf("result status=error detail=malformed measure command or no shape\n");
                fflush(stdout);
                continue;
            }
            field_int(line, "verify", &verify);
            field_int(line, "budget", &budget);
            field_int(line, "tma_kv", &tma_kv);
            field_int(line, "balance", &balance);
            for (i = 0; i < 32; i++)
                sscanf(hex + 2 * i, "%2hhx", &key[i]);
            t0 = ft__now_ms();
            t1 = t2 = t0;
            if (!ft__cache_get(s.cache, key, &c)) {
                status = "error";
                snprintf(err.msg, sizeof err.msg, "kernel %s is not in the compile cache", entry);
            } else if (ft__kernel_load(s.cu, c.cubin, entry, (int)threads, (int)rows, smem, &s.arch, &k, &err) !=
                       FT_OK) {
                status = "launch_failure";
            } else {
                if (tma_kv > 0) /* the kernel computes the shape's head dim and causality */
                    ft__kernel_use_tma(&k, (int)tma_kv, t.problem.head_dim, t.problem.causal, (int)balance);
                if (verify && ft__verify_kernel_gpu(&s.verifier, &k, &t, &check, &err) != FT_OK) {
                    status = is_fault(&err) ? "fault" : "launch_failure";
                } else if (verify && !check.pass) {
                    status = "wrong_result";
                    snprintf(err.msg, sizeof err.msg, "%s", check.detail);
                } else {
                    t1 = ft__now_ms();
                    lc.cu = s.cu;
                    lc.k = &k;
                    ft__tensors_params(&t, &lc.params);
                    ft__timing_opts_default(&o);
                    o.warmup_ms = budget / 6.0;
                    o.budget_ms = (double)budget;
                    o.min_reps = 5;
                    o.max_reps = 100;
                    if (ft__time(s.cu, ft__fwd_launch_fn, &lc, &o, &timing, &err) != FT_OK)
                        status = is_fault(&err) || err.code == FT_ERR_CUDA ? "fault" : "launch_failure";
                    t2 = ft__now_ms();
                }
                if (t1 == t0)
                    t1 = t2 = ft__now_ms();
                ft__kernel_unload(s.cu, &k);
            }
            ft__compiled_free(&c);
            fault = strcmp(status, "fault") == 0;
            one_line(err.msg);
            printf("result status=%s median=%.6f q1=%.6f q3=%.6f reps=%d l2=%.4g lse=%.4g regs=%d local=%d "
                   "verify_ms=%.2f time_ms=%.2f detail=%s\n",
                   status, timing.median_ms, timing.q1_ms, timing.q3_ms, timing.reps, check.o_rel_l2,
                   check.lse_max_err, k.registers, k.local_bytes, t1 - t0, t2 - t1,
                   strcmp(status, "ok") == 0 ? "" : err.msg);
            fflush(stdout);
            if (fault)
                return 3; /* the context is gone: let the parent start a new worker */
            continue;
        }
        printf("error unknown command\n");
        fflush(stdout);
    }
    if (have_tensors)
        ft__tensors_destroy(s.cu, &t);
    ft__session_close(&s);
    return 0;
}
