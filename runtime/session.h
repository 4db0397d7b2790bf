/* A GPU session: the driver, one device and its primary context, the compile cache and the
 * reference kernels — what run, verify and tune share. */
#ifndef FT_RUNTIME_SESSION_H
#define FT_RUNTIME_SESSION_H

#include "common/error.h"
#include "generator/spec.h"
#include "runtime/compile.h"
#include "runtime/driver.h"
#include "runtime/kernel.h"
#include "runtime/verify.h"
#include "tuning_db/db.h"

typedef struct ft_session {
    const ft_cuda *cu;
    int device;
    ft_arch arch;          /* the device's limits; name is the NVRTC target */
    CUcontext ctx;
    ft_cache *cache;       /* may be NULL */
    ft_verifier verifier;
} ft_session;

/* Opens device `device`; cache_dir NULL: the default cache, "" no cache. with_reference:
 * also compile and load the reference kernels (verification). */
ft_status ft__session_open(int device, const char *cache_dir, int with_reference, ft_session *s,
                           ft_err *err);
void ft__session_close(ft_session *s);

/* Generates, compiles (through the cache) and loads one variant for the session's device.
 * report (may be NULL) receives the compile report. FT_ERR_COMPILE, FT_ERR_LIMITS and
 * FT_ERR_CUDA say which stage failed. */
ft_status ft__session_build(ft_session *s, ft_spec *spec, const ft_variant *v, ft_kernel *out,
                            ft_resource_report *report, ft_err *err);

/* What identifies the session's GPU in tuning databases (name, limits, driver, NVRTC), as the
 * tuner records it. */
void ft__session_fingerprint(const ft_session *s, ft_db_device *dev);

/* Loads an already compiled variant. */
ft_status ft__session_load(ft_session *s, ft_spec *spec, const ft_variant *v, const void *cubin,
                           const char *entry, long long smem_dynamic, int threads, ft_kernel *out, ft_err *err);

/* The problem a variant computes on a shape: its d, causal and dtype, and (the backward's) det. */
void ft__variant_problem(const ft_spec *spec, const ft_variant *v, ft_problem *p);

#endif
