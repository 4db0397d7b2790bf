/*
 * The CUDA driver, loaded at run time with dlopen("libcuda.so.1"), so that flashtune starts
 * (and plans, and generates) on machines without a driver. cuda.h supplies the types only;
 * every function comes through cuGetProcAddress at the ABI of the cuda.h we compile with.
 */
#ifndef FT_RUNTIME_DRIVER_H
#define FT_RUNTIME_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "common/error.h"
#include "generator/arch.h"

/* Functions flashtune uses, each bound at the ABI version whose signature it calls
 * (cudaTypedefs.h's PFN_<name>_v<version>): asking cuGetProcAddress for CUDA_VERSION would
 * return CUDA 13's cuCtxSynchronize(CUcontext) where the header declares cuCtxSynchronize(void).
 * All are required except those in FT_CUDA_OPTIONAL. */
#define FT_CUDA_FUNCTIONS(X)                                                                  \
    X(cuDriverGetVersion, 2020) X(cuDeviceGetCount, 2000) X(cuDeviceGet, 2000)                \
    X(cuDeviceGetName, 2000) X(cuDeviceGetAttribute, 2000) X(cuDeviceTotalMem, 3020)          \
    X(cuDevicePrimaryCtxRetain, 7000) X(cuDevicePrimaryCtxRelease, 11000)                     \
    X(cuCtxSetCurrent, 4000) X(cuCtxGetCurrent, 4000) X(cuCtxGetDevice, 2000)                 \
    X(cuCtxSynchronize, 2000) X(cuModuleLoadData, 2000) X(cuModuleUnload, 2000)               \
    X(cuModuleGetFunction, 2000) X(cuFuncGetAttribute, 2020) X(cuFuncSetAttribute, 9000)      \
    X(cuLaunchKernel, 4000) X(cuMemAlloc, 3020) X(cuMemFree, 3020) X(cuMemcpyHtoD, 3020)      \
    X(cuMemcpyDtoH, 3020) X(cuMemcpyDtoD, 3020) X(cuMemcpyDtoHAsync, 3020) X(cuMemsetD8, 3020) X(cuMemsetD16, 3020) \
    X(cuMemsetD32, 3020) X(cuMemsetD8Async, 3020) X(cuMemGetInfo, 3020)                       \
    X(cuStreamCreate, 2000) X(cuStreamDestroy, 4000) X(cuStreamSynchronize, 2000)             \
    X(cuEventCreate, 2000) X(cuEventRecord, 2000) X(cuEventSynchronize, 2000)                 \
    X(cuEventElapsedTime, 2000) X(cuEventDestroy, 4000) X(cuGetErrorName, 6000)               \
    X(cuGetErrorString, 6000) X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)            \
    X(cuPointerGetAttribute, 4000)

#define FT_CUDA_OPTIONAL(X) X(cuTensorMapEncodeTiled, 12000)

/* The members are named without the header's _v2 macros (ft_cuda's own names). */
typedef struct ft_cuda {
    void *lib;
    int driver_version;
#define FT_CUDA_MEMBER(name, version) PFN_##name##_v##version p_##name;
    FT_CUDA_FUNCTIONS(FT_CUDA_MEMBER)
    FT_CUDA_OPTIONAL(FT_CUDA_MEMBER)
#undef FT_CUDA_MEMBER
} ft_cuda;

/* Loads the driver (once per process; later calls return the same table) and calls cuInit.
 * FT_ERR_NO_DRIVER when libcuda.so.1 is missing, FT_ERR_NO_DEVICE when it reports no GPU. */
ft_status ft__cuda_load(const ft_cuda **out, ft_err *err);

/* Turns a CUresult into FT_ERR_CUDA with "what: CUDA_ERROR_X (description)"; FT_OK for
 * CUDA_SUCCESS. */
ft_status ft__cuda_check(const ft_cuda *cu, CUresult r, ft_err *err, const char *what);

/* The limits of device `ordinal`, read through the driver (from_device = 1); name is the
 * NVRTC target of its compute capability ("sm_90"). */
ft_status ft__cuda_device_arch(const ft_cuda *cu, int ordinal, ft_arch *out, ft_err *err);

/* Retains the device's primary context (the one the CUDA runtime and PyTorch use) and makes
 * it current on the calling thread. Release with ft__cuda_release. */
ft_status ft__cuda_use_device(const ft_cuda *cu, int ordinal, CUcontext *ctx, ft_err *err);
void ft__cuda_release(const ft_cuda *cu, int ordinal);

#endif
