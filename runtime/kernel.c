#include "kernel.h"

#include <string.h>

ft_status ft__kernel_load(const ft_cuda *cu, const void *cubin, const char *entry, int threads,
                          int rows_per_block, long long smem_dynamic, const ft_arch *dev,
                          ft_kernel *out, ft_err *err)
{
    ft_status rc;
    ft_kernel k;

    memset(&k, 0, sizeof k);
    memset(out, 0, sizeof *out);
    k.threads = threads;
    k.rows_per_block = rows_per_block;
    k.smem_dynamic = smem_dynamic;
    rc = ft__cuda_check(cu, cu->p_cuModuleLoadData(&k.module, cubin), err, "cuModuleLoadData");
    if (rc != FT_OK)
        goto out;
    rc = ft__cuda_check(cu, cu->p_cuModuleGetFunction(&k.fn, k.module, entry), err, "cuModuleGetFunction");
    if (rc != FT_OK)
        goto out;
    if ((rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, k.fn),
                             err, "cuFuncGetAttribute")) != FT_OK ||
        (rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.fn),
                             err, "cuFuncGetAttribute")) != FT_OK ||
        (rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k.fn),
                             err, "cuFuncGetAttribute")) != FT_OK ||
        (rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.fn),
                             err, "cuFuncGetAttribute")) != FT_OK)
        goto out;
    if (threads > k.max_threads) {
        rc = ft__fail(err, FT_ERR_LIMITS, "%s needs %d threads per block, its %d registers allow %d",
                      entry, threads, k.registers, k.max_threads);
        goto out;
    }
    if (k.smem_static + smem_dynamic > dev->smem_per_block) {
        rc = ft__fail(err, FT_ERR_LIMITS, "%s needs %lld B of shared memory, the device allows %lld",
                      entry, k.smem_static + smem_dynamic, dev->smem_per_block);
        goto out;
    }
    rc = ft__cuda_check(cu, cu->p_cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   (int)smem_dynamic),
                        err, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    if (rc != FT_OK)
        goto out;
    rc = ft__cuda_check(cu, cu->p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, k.fn, threads,
                                                                           (size_t)smem_dynamic),
                        err, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (rc != FT_OK)
        goto out;
    if (k.blocks_per_sm < 1) {
        rc = ft__fail(err, FT_ERR_LIMITS, "%s cannot be resident: 0 blocks per multiprocessor", entry);
        goto out;
    }
    *out = k;
    k.module = NULL;
out:
    if (k.module != NULL)
        cu->p_cuModuleUnload(k.module);
    return rc;
}

void ft__kernel_unload(const ft_cuda *cu, ft_kernel *k)
{
    if (k->module != NULL)
        cu->p_cuModuleUnload(k->module);
    k->module = NULL;
    k->fn = NULL;
}

ft_status ft__fwd_launch_fn(void *launch, CUstream stream, ft_err *err)
{
    const ft_fwd_launch *l = launch;
    return ft__kernel_launch_fwd(l->cu, l->k, &l->params, stream, err);
}

ft_status ft__kernel_launch_fwd(const ft_cuda *cu, const ft_kernel *k, const ft_fwd_params *p,
                                CUstream stream, ft_err *err)
{
    void *args[] = {(void *)p};
    unsigned gx = (unsigned)((p->seqlen_q + k->rows_per_block - 1) / k->rows_per_block);

    if (gx == 0 || p->heads_q <= 0 || p->batch <= 0)
        return FT_OK; /* nothing to compute */
    if (p->batch > 65535 || p->heads_q > 65535)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "batch and heads must be at most 65535");
    return ft__cuda_check(cu,
                          cu->p_cuLaunchKernel(k->fn, gx, (unsigned)p->heads_q, (unsigned)p->batch,
                                             (unsigned)k->threads, 1, 1, (unsigned)k->smem_dynamic,
                                             stream, args, NULL),
                          err, "cuLaunchKernel");
}
