#include "compile.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/sha256.h"

/* NVRTC is loaded at run time, as the driver is (runtime/driver.c), so that a program or a
 * Python package built against one toolkit starts without it and finds it where it is: the
 * file $FLASHTUNE_NVRTC names, else FT_NVRTC_SONAME through the loader (LD_LIBRARY_PATH, the
 * library's RUNPATH, the system's directories), else in the directory it was built against,
 * in $CUDA_HOME/lib64 and in /usr/local/cuda/lib64. */
#ifndef FT_NVRTC_SONAME
#define FT_NVRTC_SONAME "libnvrtc.so"
#endif
#ifndef FT_NVRTC_BUILD_DIR
#define FT_NVRTC_BUILD_DIR "/usr/local/cuda/lib64"
#endif

#define FT_NVRTC_FUNCTIONS(X)                                                                   \
    X(nvrtcVersion, nvrtcResult, (int *, int *))                                                \
    X(nvrtcGetErrorString, const char *, (nvrtcResult))                                         \
    X(nvrtcCreateProgram, nvrtcResult,                                                          \
      (nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *)) \
    X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char *const *))               \
    X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t *))                            \
    X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char *))                                  \
    X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t *))                                 \
    X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char *))                                       \
    X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram *))

static struct {
#define FT_NVRTC_FIELD(name, ret, args) ret(*name) args;
    FT_NVRTC_FUNCTIONS(FT_NVRTC_FIELD)
#undef FT_NVRTC_FIELD
} nv;
static ft_status nvrtc_status = FT_ERR_INTERNAL;
static ft_err nvrtc_error;
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;

static void *open_nvrtc(char *tried, size_t cap)
{
    const char *env = getenv("FLASHTUNE_NVRTC"), *home = getenv("CUDA_HOME");
    char path[1024];
    const char *dirs[3];
    size_t n = 0;
    int i;
    void *lib;

    tried[0] = '\0';
    if (env != NULL && env[0] != '\0') {
        lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        snprintf(tried, cap, "$FLASHTUNE_NVRTC %s: %s", env, lib == NULL ? dlerror() : "ok");
        return lib; /* named: nothing else is tried */
    }
    if ((lib = dlopen(FT_NVRTC_SONAME, RTLD_NOW | RTLD_LOCAL)) != NULL)
        return lib;
    n += (size_t)snprintf(tried + n, cap - n, "%s", dlerror());
    dirs[0] = FT_NVRTC_BUILD_DIR;
    dirs[1] = home != NULL && home[0] != '\0' ? home : NULL;
    dirs[2] = "/usr/local/cuda/lib64";
    for (i = 0; i < 3; i++) {
        if (dirs[i] == NULL)
            continue;
        snprintf(path, sizeof path, i == 1 ? "%s/lib64/%s" : "%s/%s", dirs[i], FT_NVRTC_SONAME);
        if ((lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
            return lib;
        if (n < cap)
            n += (size_t)snprintf(tried + n, cap - n, "; %s", path);
    }
    return NULL;
}

static void load_nvrtc(void)
{
    char tried[1024];
    void *lib = open_nvrtc(tried, sizeof tried);

    if (lib == NULL) {
        nvrtc_status = ft__fail(&nvrtc_error, FT_ERR_COMPILE,
                                "NVRTC (%s) cannot be loaded: %s (set FLASHTUNE_NVRTC to its file, or "
                                "LD_LIBRARY_PATH to the CUDA toolkit's lib64)",
                                FT_NVRTC_SONAME, tried);
        return;
    }
#define FT_NVRTC_LOAD(name, ret, args)                                                           \
    if ((*(void **)&nv.name = dlsym(lib, #name)) == NULL) {                                     \
        nvrtc_status = ft__fail(&nvrtc_error, FT_ERR_COMPILE, "the NVRTC library lacks %s", #name); \
        return;                                                                                   \
    }
    FT_NVRTC_FUNCTIONS(FT_NVRTC_LOAD)
#undef FT_NVRTC_LOAD
    nvrtc_status = FT_OK;
}

/* NVRTC's functions in nv, or FT_ERR_COMPILE with the reason. */
static ft_status nvrtc_load(ft_err *err)
{
    pthread_once(&nvrtc_once, load_nvrtc);
    if (nvrtc_status != FT_OK && err != NULL)
        *err = nvrtc_error;
    return nvrtc_status;
}

/* The options every kernel is compiled with, besides the target. No fast-math: exp2f already
 * compiles to ex2.approx, and the rest of the arithmetic keeps IEEE semantics. --no-cache
 * keeps the driver's own compute cache out of it, so that compile times are real and the
 * project's cache is the only one. */
static const char *const base_options[] = {"--std=c++17", "--ptxas-options=-v", "--no-cache"};
#define N_BASE_OPTIONS (sizeof base_options / sizeof base_options[0])

ft_status ft__nvrtc_version(int *major, int *minor, ft_err *err)
{
    nvrtcResult r;

    if (nvrtc_load(err) != FT_OK)
        return FT_ERR_COMPILE;
    r = nv.nvrtcVersion(major, minor);
    if (r != NVRTC_SUCCESS)
        return ft__fail(err, FT_ERR_COMPILE, "nvrtcVersion: %s", nv.nvrtcGetErrorString(r));
    return FT_OK;
}

void ft__compile_key(const char *source, const char *arch, uint8_t key[32])
{
    ft_sha256 s;
    char head[128];
    int major = 0, minor = 0;
    size_t i;

    /* Without NVRTC the version reads 0.0: no cached result matches, and compiling says why. */
    if (nvrtc_load(NULL) == FT_OK)
        nv.nvrtcVersion(&major, &minor);
    ft__sha256_init(&s);
    snprintf(head, sizeof head, "flashtune-compile-v1\n%s\nnvrtc %d.%d\n", arch, major, minor);
    ft__sha256_update(&s, head, strlen(head));
    for (i = 0; i < N_BASE_OPTIONS; i++) {
        ft__sha256_update(&s, base_options[i], strlen(base_options[i]));
        ft__sha256_update(&s, "\n", 1);
    }
    ft__sha256_update(&s, source, strlen(source));
    ft__sha256_final(&s, key);
}

ft_status ft__compile(const char *source, const char *name, const char *arch, ft_cache *cache,
                      ft_compiled *out, ft_err *err)
{
    ft_status rc = FT_ERR_COMPILE;
    nvrtcProgram prog = NULL;
    nvrtcResult r;
    const char *opts[N_BASE_OPTIONS + 1];
    char arch_opt[64];
    uint8_t key[32];
    size_t log_size = 0;
    size_t i;
    double t0;

    memset(out, 0, sizeof *out);
    ft__compile_key(source, arch, key);
    if (cache != NULL && ft__cache_get(cache, key, out))
        return FT_OK;

    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    opts[0] = arch_opt;
    for (i = 0; i < N_BASE_OPTIONS; i++)
        opts[i + 1] = base_options[i];

    if (nvrtc_load(err) != FT_OK)
        goto out;
    t0 = ft__now_ms();
    r = nv.nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        ft__fail(err, FT_ERR_COMPILE, "nvrtcCreateProgram: %s", nv.nvrtcGetErrorString(r));
        goto out;
    }
    r = nv.nvrtcCompileProgram(prog, (int)(N_BASE_OPTIONS + 1), opts);
    out->compile_ms = ft__now_ms() - t0;
    if (nv.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
        out->log = malloc(log_size + 1);
        if (out->log == NULL) {
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory for the NVRTC log");
            goto out;
        }
        out->log[0] = '\0';
        nv.nvrtcGetProgramLog(prog, out->log);
        out->log[log_size] = '\0';
    }
    if (r != NVRTC_SUCCESS) {
        char first[512];
        ft__log_first_error(out->log, first, sizeof first);
        ft__fail(err, FT_ERR_COMPILE, "%s", first[0] ? first : nv.nvrtcGetErrorString(r));
        goto out;
    }
    r = nv.nvrtcGetCUBINSize(prog, &out->cubin_size);
    if (r != NVRTC_SUCCESS || out->cubin_size == 0) {
        ft__fail(err, FT_ERR_COMPILE, "NVRTC produced no cubin for %s (%s)", arch,
                 nv.nvrtcGetErrorString(r));
        goto out;
    }
    out->cubin = malloc(out->cubin_size);
    if (out->cubin == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte cubin",
                      out->cubin_size);
        goto out;
    }
    r = nv.nvrtcGetCUBIN(prog, (char *)out->cubin);
    if (r != NVRTC_SUCCESS) {
        ft__fail(err, FT_ERR_COMPILE, "nvrtcGetCUBIN: %s", nv.nvrtcGetErrorString(r));
        goto out;
    }
    if (out->log == NULL) {
        out->log = malloc(1);
        if (out->log == NULL) {
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
            goto out;
        }
        out->log[0] = '\0';
    }
    ft__parse_ptxas_report(out->log, &out->report);
    if (cache != NULL) {
        ft_err cerr;
        /* A cache that cannot be written costs time, not correctness: keep the result. */
        ft__cache_put(cache, key, out, &cerr);
    }
    rc = FT_OK;
out:
    if (prog != NULL)
        nv.nvrtcDestroyProgram(&prog);
    if (rc != FT_OK && rc != FT_ERR_COMPILE) {
        ft__compiled_free(out);
    } else if (rc != FT_OK) {
        free(out->cubin);
        out->cubin = NULL;
        out->cubin_size = 0;
    }
    return rc;
}
