#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static ft_cuda the_driver;
static ft_status load_status = FT_ERR_INTERNAL;
static ft_err load_error;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

typedef CUresult (*proc_address_fn)(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);

static void load(void)
{
    ft_cuda *cu = &the_driver;
    CUresult (*init)(unsigned int);
    proc_address_fn proc;
    CUresult r;
    int count = 0;

    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu->lib == NULL) {
        load_status = ft__fail(&load_error, FT_ERR_NO_DRIVER,
                               "no CUDA driver: libcuda.so.1 cannot be loaded (%s)", dlerror());
        return;
    }
    *(void **)&init = dlsym(cu->lib, "cuInit");
    *(void **)&proc = dlsym(cu->lib, "cuGetProcAddress_v2");
    if (init == NULL || proc == NULL) {
        load_status = ft__fail(&load_error, FT_ERR_NO_DRIVER,
                               "libcuda.so.1 lacks cuInit or cuGetProcAddress_v2: a CUDA 12 or newer "
                               "driver is needed");
        return;
    }
    r = init(0);
#define FT_CUDA_GET(name, version)                                                            \
    {                                                                                          \
        CUdriverProcAddressQueryResult st;                                                     \
        if (proc(#name, (void **)&cu->p_##name, version, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=  \
                CUDA_SUCCESS ||                                                                \
            cu->p_##name == NULL) {                                                            \
            load_status = ft__fail(&load_error, FT_ERR_NO_DRIVER,                              \
                                   "the CUDA driver lacks %s (driver too old?)", #name);       \
            return;                                                                            \
        }                                                                                      \
    }
    FT_CUDA_FUNCTIONS(FT_CUDA_GET)
#undef FT_CUDA_GET
#define FT_CUDA_GET_OPTIONAL(name, version)                                                    \
    {                                                                                          \
        CUdriverProcAddressQueryResult st;                                                     \
        if (proc(#name, (void **)&cu->p_##name, version, CU_GET_PROC_ADDRESS_DEFAULT, &st) !=  \
            CUDA_SUCCESS)                                                                      \
            cu->p_##name = NULL;                                                               \
    }
    FT_CUDA_OPTIONAL(FT_CUDA_GET_OPTIONAL)
#undef FT_CUDA_GET_OPTIONAL
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        cu->p_cuGetErrorName(r, &name);
        load_status = ft__fail(&load_error, r == CUDA_ERROR_NO_DEVICE ? FT_ERR_NO_DEVICE : FT_ERR_CUDA,
                               "cuInit: %s", name ? name : "unknown error");
        return;
    }
    cu->p_cuDriverGetVersion(&cu->driver_version);
    if (cu->p_cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        load_status = ft__fail(&load_error, FT_ERR_NO_DEVICE, "the CUDA driver reports no GPU");
        return;
    }
    load_status = FT_OK;
}

ft_status ft__cuda_load(const ft_cuda **out, ft_err *err)
{
    pthread_once(&load_once, load);
    if (load_status != FT_OK) {
        *out = NULL;
        if (err != NULL)
            *err = load_error;
        return load_status;
    }
    *out = &the_driver;
    return FT_OK;
}

ft_status ft__cuda_check(const ft_cuda *cu, CUresult r, ft_err *err, const char *what)
{
    const char *name = NULL;
    const char *desc = NULL;

    if (r == CUDA_SUCCESS)
        return FT_OK;
    cu->p_cuGetErrorName(r, &name);
    cu->p_cuGetErrorString(r, &desc);
    return ft__fail(err, FT_ERR_CUDA, "%s: %s (%s)", what, name ? name : "CUDA error",
                    desc ? desc : "no description");
}

static ft_status attr(const ft_cuda *cu, CUdevice dev, CUdevice_attribute a, int *v, ft_err *err)
{
    return ft__cuda_check(cu, cu->p_cuDeviceGetAttribute(v, a, dev), err, "cuDeviceGetAttribute");
}

ft_status ft__cuda_device_arch(const ft_cuda *cu, int ordinal, ft_arch *out, ft_err *err)
{
    ft_status rc;
    CUdevice dev;
    int major = 0, minor = 0, v = 0, count = 0;

    memset(out, 0, sizeof *out);
    cu->p_cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "no GPU %d: the driver reports %d", ordinal, count);
    rc = ft__cuda_check(cu, cu->p_cuDeviceGet(&dev, ordinal), err, "cuDeviceGet");
    if (rc != FT_OK)
        return rc;
    cu->p_cuDeviceGetName(out->device_name, (int)sizeof out->device_name, dev);
    if ((rc = attr(cu, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major, err)) != FT_OK ||
        (rc = attr(cu, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor, err)) != FT_OK)
        return rc;
    out->cc = major * 10 + minor;
    snprintf(out->name, sizeof out->name, "sm_%d%d", major, minor);
#define READ(field, a)                                                \
    if ((rc = attr(cu, dev, a, &v, err)) != FT_OK)                    \
        return rc;                                                    \
    out->field = v;
    READ(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    READ(smem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    READ(smem_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
    READ(smem_reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)
    READ(regs_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)
    READ(regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)
    READ(threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    READ(threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
#undef READ
    out->regs_per_thread = 255;
    out->from_device = 1;
    return FT_OK;
}

ft_status ft__cuda_use_device(const ft_cuda *cu, int ordinal, CUcontext *ctx, ft_err *err)
{
    ft_status rc;
    CUdevice dev;

    rc = ft__cuda_check(cu, cu->p_cuDeviceGet(&dev, ordinal), err, "cuDeviceGet");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuDevicePrimaryCtxRetain(ctx, dev), err, "cuDevicePrimaryCtxRetain");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuCtxSetCurrent(*ctx), err, "cuCtxSetCurrent");
    return rc;
}

void ft__cuda_release(const ft_cuda *cu, int ordinal)
{
    CUdevice dev;
    if (cu->p_cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS)
        cu->p_cuDevicePrimaryCtxRelease(dev);
}
