/*
 * The CUDA driver, loaded at run time with dlopen("libcuda.so.1"), so that flashtune starts
 * (and plans, and generates) on machines without a driver. cuda.h supplies the types only;
 * every function comes through cuGetProcAddress at the ABI of the cuda.h we compile with.
 */
#ifndef FT_RUNTIME_DRIVER_H
#define FT_RUNTIME_DRIVER_H

#include <cuda.h>

#include "common/error.h"
#include "generator/arch.h"

/* Functions flashtune uses; all are required except those in FT_CUDA_OPTIONAL. */
#define FT_CUDA_FUNCTIONS(X)                                                                 \
    X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)              \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                  \
    X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice)     \
    X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)         \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoHAsync) X(cuMemsetD8) X(cuMemsetD16)        \
    X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)   \
    X(cuStreamSynchronize) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)           \
    X(cuEventElapsedTime) X(cuEventDestroy) X(cuGetErrorName) X(cuGetErrorString)            \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuPointerGetAttribute)

#define FT_CUDA_OPTIONAL(X) X(cuTensorMapEncodeTiled)

typedef struct ft_cuda {
    void *lib;
    int driver_version;
#define FT_CUDA_MEMBER(name) __typeof__(name) *name;
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
