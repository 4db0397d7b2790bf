#include "kernel.h"

#include <string.h>

#include "generator/family.h"

ft_status ft__kernel_load(const ft_cuda *cu, const void *cubin, const char *entry, const ft_launch_facts *facts,
                          const ft_arch *dev, ft_kernel *out, ft_err *err)
{
    ft_status rc;
    ft_kernel k;
    CUfunction fn = NULL;
    const int threads = facts->threads;
    const long long smem_dynamic = facts->smem_dynamic;

    memset(&k, 0, sizeof k);
    memset(out, 0, sizeof *out);
    k.facts = *facts;
    rc = ft__cuda_check(cu, cu->p_cuModuleLoadData(&k.module, cubin), err, "cuModuleLoadData");
    if (rc != FT_OK)
        goto out;
    rc = ft__cuda_check(cu, cu->p_cuModuleGetFunction(&fn, k.module, entry), err, "cuModuleGetFunction");
    if (rc != FT_OK)
        goto out;
    if ((rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, fn),
                             err, "cuFuncGetAttribute")) != FT_OK ||
        (rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn),
                             err, "cuFuncGetAttribute")) != FT_OK ||
        (rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
                             err, "cuFuncGetAttribute")) != FT_OK ||
        (rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&k.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
                             err, "cuFuncGetAttribute")) != FT_OK)
        goto out;
    if (threads <= 0 || threads > k.max_threads) {
        rc = ft__fail(err, FT_ERR_LIMITS, "%s needs %d threads per block, its %d registers allow %d",
                      entry, threads, k.registers, k.max_threads);
        goto out;
    }
    if (smem_dynamic < 0 || k.smem_static + smem_dynamic > dev->smem_per_block) {
        rc = ft__fail(err, FT_ERR_LIMITS, "%s needs %lld B of shared memory, the device allows %lld",
                      entry, k.smem_static + smem_dynamic, dev->smem_per_block);
        goto out;
    }
    rc = ft__cuda_check(cu, cu->p_cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   (int)smem_dynamic),
                        err, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    if (rc != FT_OK)
        goto out;
    rc = ft__cuda_check(cu, cu->p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, fn, threads,
                                                                           (size_t)smem_dynamic),
                        err, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (rc != FT_OK)
        goto out;
    k.facts.max_resident = dev->sms * k.blocks_per_sm;
    if (k.blocks_per_sm < 1) {
        rc = ft__fail(err, FT_ERR_LIMITS, "%s cannot be resident: 0 blocks per multiprocessor", entry);
        goto out;
    }
    k.fns[0] = fn;
    k.nfns = 1;
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
    memset(k->fns, 0, sizeof k->fns);
    k->nfns = 0;
}

ft_status ft__kernel_load_entries(const ft_cuda *cu, ft_kernel *k, const char *const *names, int n,
                                  long long smem_limit, ft_err *err)
{
    ft_status rc;
    int i, smem_static = 0;

    if (n > FT_KERNEL_MAX_FNS)
        return ft__fail(err, FT_ERR_INTERNAL, "%s has %d kernels, at most %d are held", names[0], n,
                        FT_KERNEL_MAX_FNS);
    for (i = 1; i < n; i++) {
        rc = ft__cuda_check(cu, cu->p_cuModuleGetFunction(&k->fns[i], k->module, names[i]), err, "cuModuleGetFunction");
        if (rc == FT_OK)
            rc = ft__cuda_check(cu, cu->p_cuFuncGetAttribute(&smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                                           k->fns[i]),
                                err, "cuFuncGetAttribute");
        /* The main entry's dynamic size, or what this entry's static shared memory leaves of the
         * limit (the driver refuses a larger one; the plans launch these entries with none). */
        if (rc == FT_OK) {
            long long dyn = k->facts.smem_dynamic;
            if (dyn > smem_limit - smem_static)
                dyn = smem_limit - smem_static > 0 ? smem_limit - smem_static : 0;
            rc = ft__cuda_check(cu, cu->p_cuFuncSetAttribute(k->fns[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                           (int)dyn),
                                err, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        }
        if (rc != FT_OK) {
            ft__err_prefix(err, "%s", names[i]);
            return rc;
        }
    }
    k->nfns = n;
    return FT_OK;
}

ft_status ft__kernel_load_family(const ft_cuda *cu, const ft_family *fam, const void *cubin, const char *entry,
                                 const ft_launch_facts *facts, const ft_arch *dev, ft_kernel *out, ft_err *err)
{
    const char *names[FT_KERNEL_MAX_FNS];
    char more[FT_KERNEL_MAX_FNS][FT_ENTRY_MAX];
    ft_status rc = ft__kernel_load(cu, cubin, entry, facts, dev, out, err);
    int i, n = ft__family_nentries(fam);

    if (rc != FT_OK || n == 1)
        return rc;
    if (n > FT_KERNEL_MAX_FNS) {
        ft__kernel_unload(cu, out);
        return ft__fail(err, FT_ERR_INTERNAL, "family %s has %d kernels, more than %d", fam->name, n,
                        FT_KERNEL_MAX_FNS);
    }
    for (i = 0; i < n; i++) {
        if (!ft__family_entry_name(fam, entry, i, more[i], sizeof more[i])) {
            ft__kernel_unload(cu, out);
            return ft__fail(err, FT_ERR_INTERNAL, "%s: an entry name too long", entry);
        }
        names[i] = more[i];
    }
    rc = ft__kernel_load_entries(cu, out, names, n, dev->smem_per_block, err);
    if (rc != FT_OK)
        ft__kernel_unload(cu, out);
    return rc;
}

ft_status ft__fwd_launch_fn(void *launch, CUstream stream, ft_err *err)
{
    const ft_fwd_launch *l = launch;
    return ft__kernel_launch_fwd(l->cu, l->k, &l->params, stream, err);
}

/* A rank-4 map of one 16-bit tensor, (element, position, head, batch) from the fastest
 * dimension out, whose boxes are `rows` positions of one head by `span` elements (the kernel's
 * launch facts say: 64, 128-byte swizzle; 32, 64-byte swizzle; 16, 32-byte swizzle), as the
 * sm_90a templates read them. Positions past seqlen read as zeros. With pack > 1 (ft__fwd_pack)
 * the map is (element, head, position, batch) and its boxes pack heads by rows / pack positions:
 * the same `rows` rows in shared memory, row r the box's position r / pack, head r % pack. */
static ft_status encode_map(const ft_cuda *cu, CUtensorMap *map, const void *ptr, const ft_launch_facts *f,
                            int seqlen, int heads, int batch, int64_t batch_stride, int64_t row_stride,
                            int64_t head_stride, int rows, int pack, const char *what, ft_err *err)
{
    const int span = f->tma_span;
    cuuint64_t dims[4] = {(cuuint64_t)f->head_dim, (cuuint64_t)seqlen, (cuuint64_t)heads, (cuuint64_t)batch};
    cuuint64_t strides[3] = {(cuuint64_t)row_stride * 2, (cuuint64_t)head_stride * 2, (cuuint64_t)batch_stride * 2};
    cuuint32_t box[4] = {(cuuint32_t)span, (cuuint32_t)rows, 1, 1};
    cuuint32_t estrides[4] = {1, 1, 1, 1};
    CUresult r;

    if (span != 64 && span != 32 && span != 16)
        return ft__fail(err, FT_ERR_INTERNAL, "a TMA kernel whose launch facts give no swizzle span (%d)", span);
    if (pack > 1) {
        if (rows % pack != 0 || heads % pack != 0)
            return ft__fail(err, FT_ERR_INTERNAL, "%d heads packed into boxes of %d rows of %d heads", pack, rows,
                            heads);
        dims[1] = (cuuint64_t)heads, dims[2] = (cuuint64_t)seqlen;
        strides[0] = (cuuint64_t)head_stride * 2, strides[1] = (cuuint64_t)row_stride * 2;
        box[1] = (cuuint32_t)pack, box[2] = (cuuint32_t)(rows / pack);
    }
    r = cu->p_cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)ptr, dims, strides, box,
                                     estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                     span == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : span == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : CU_TENSOR_MAP_SWIZZLE_32B,
                                     CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        ft_status rc = ft__cuda_check(cu, r, err, "cuTensorMapEncodeTiled");
        return ft__fail(err, rc == FT_ERR_CUDA ? FT_ERR_INVALID_ARGUMENT : rc,
                        "the %s tensor's layout cannot be read by TMA (strides %lld/%lld/%lld elements): %s", what,
                        (long long)batch_stride, (long long)row_stride, (long long)head_stride, err->msg);
    }
    return FT_OK;
}

/* A forward tensor's map: dense [batch, seqlen, heads, d] (pack > 1: its heads packed, as
 * encode_map says), or with total > 0 a packed variable-length one, [total, heads, d] as one
 * batch of total rows (a sequence's tiles start at its first row; the rows past total read as
 * zeros). */
static ft_status encode_fwd_map(const ft_cuda *cu, CUtensorMap *map, const void *ptr, const ft_launch_facts *f, int seqlen,
                                int heads, int batch, int total, int64_t batch_stride, int64_t row_stride,
                                int64_t head_stride, int rows, int pack, const char *what, ft_err *err)
{
    if (total <= 0)
        return encode_map(cu, map, ptr, f, seqlen, heads, batch, batch_stride, row_stride, head_stride, rows,
                          pack, what, err);
    /* one batch: its stride is never stepped, any 16-byte multiple will do */
    return encode_map(cu, map, ptr, f, total, heads, 1, row_stride > 0 ? row_stride * total : 8, row_stride,
                      head_stride, rows, 1, what, err);
}

/* The tensor maps of a backward TMA kernel: Q and dO in boxes of rows_per_block rows, K and V in
 * boxes of tma_rows_kv. */
static ft_status encode_bwd_maps(const ft_cuda *cu, const ft_launch_facts *f, const ft_bwd_params *p,
                                 CUtensorMap maps[4], ft_err *err)
{
    ft_status rc;

    if (cu->p_cuTensorMapEncodeTiled == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer)");
    if ((rc = encode_map(cu, &maps[0], p->q, f, p->seqlen_q, p->heads_q, p->batch, p->q_batch_stride,
                         p->q_row_stride, p->q_head_stride, f->rows_per_block, 1, "Q", err)) != FT_OK ||
        (rc = encode_map(cu, &maps[1], p->dout, f, p->seqlen_q, p->heads_q, p->batch,
                         p->dout_batch_stride, p->dout_row_stride, p->dout_head_stride, f->rows_per_block, 1, "dO",
                         err)) != FT_OK ||
        (rc = encode_map(cu, &maps[2], p->k, f, p->seqlen_k, p->heads_kv, p->batch, p->k_batch_stride,
                         p->k_row_stride, p->k_head_stride, f->tma_rows_kv, 1, "K", err)) != FT_OK)
        return rc;
    return encode_map(cu, &maps[3], p->v, f, p->seqlen_k, p->heads_kv, p->batch, p->v_batch_stride,
                      p->v_row_stride, p->v_head_stride, f->tma_rows_kv, 1, "V", err);
}

/* Enqueues a launch plan's steps on stream, in order: memsets of the workspace ws, and kernels
 * of k, each taking args. */
static ft_status run_steps(const ft_cuda *cu, const ft_kernel *k, const ft_launch_plan *plan, void **args,
                           CUdeviceptr ws, CUstream stream, ft_err *err)
{
    ft_status rc = FT_OK;
    int i;

    for (i = 0; i < plan->nsteps && rc == FT_OK; i++) {
        const ft_launch_step *s = &plan->steps[i];
        if (s->kind == FT_STEP_MEMSET) {
            rc = ft__cuda_check(cu, cu->p_cuMemsetD8Async(ws + s->ws_offset, 0, s->ws_bytes, stream), err,
                                "cuMemsetD8Async(workspace)");
            continue;
        }
        if (s->kind != FT_STEP_KERNEL || s->kernel < 0 || s->kernel >= k->nfns || k->fns[s->kernel] == NULL)
            return ft__fail(err, FT_ERR_INTERNAL, "a launch plan's step %d names kernel %d of %d loaded", i, s->kernel,
                            k->nfns);
        rc = ft__cuda_check(cu,
                            cu->p_cuLaunchKernel(k->fns[s->kernel], s->grid[0], s->grid[1], s->grid[2], s->block, 1, 1,
                                                 s->smem, stream, args, NULL),
                            err, "cuLaunchKernel");
    }
    return rc;
}

ft_status ft__kernel_run_plan(const ft_cuda *cu, const ft_kernel *k, const ft_launch_plan *plan,
                              const ft_bwd_params *params, CUdeviceptr ws, CUstream stream, ft_err *err)
{
    CUtensorMap maps[4];
    void *args[] = {(void *)params, &maps[0], &maps[1], &maps[2], &maps[3]};
    ft_status rc;

    if (plan->nsteps > 0 && k->facts.tma && (rc = encode_bwd_maps(cu, &k->facts, params, maps, err)) != FT_OK)
        return rc;
    return run_steps(cu, k, plan, args, ws, stream, err);
}

void ft__fwd_params_problem(const ft_fwd_params *p, ft_problem *out)
{
    memset(out, 0, sizeof *out);
    out->batch = p->batch, out->heads_q = p->heads_q, out->heads_kv = p->heads_kv;
    out->seqlen_q = p->seqlen_q, out->seqlen_k = p->seqlen_k;
    out->scale = p->scale;
    out->workspace_cap = p->ws != NULL ? (long long)p->ws_bytes : 0;
    out->varlen = p->cu_seqlens_q != NULL || p->cu_seqlens_k != NULL;
}

/* The forward operation's plan of kernel k for a call of p's sizes (its head dim the kernel's). */
static ft_status fwd_plan_of(const ft_kernel *k, const ft_problem *p, ft_launch_plan *out, ft_err *err)
{
    ft_problem prob = *p;

    prob.head_dim = k->facts.head_dim;
    return ft__op_fwd.plan(&k->facts, &prob, out, err);
}

ft_status ft__kernel_fwd_workspace(const ft_kernel *k, const ft_problem *p, size_t *bytes, ft_err *err)
{
    ft_launch_plan plan;
    ft_problem prob = *p;
    ft_status rc;

    prob.workspace_cap = -1;
    rc = fwd_plan_of(k, &prob, &plan, err);
    *bytes = rc == FT_OK ? plan.workspace_bytes : 0;
    return rc;
}

ft_status ft__kernel_prepare(const ft_cuda *cu, const ft_kernel *k, const ft_fwd_params *p, ft_launch *l,
                             ft_err *err)
{
    const ft_launch_facts *f = &k->facts;
    const int needs = ft__fwd_needs(p->seqused_k != NULL || p->block_table != NULL, p->cu_seqlens_q, p->total_q,
                                    p->cu_seqlens_k, p->total_k);
    ft_problem prob;
    ft_status rc;
    int i, pack;

    memset(l, 0, sizeof *l);
    if (!ft__facts_take(f, needs))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s", needs == FT_NEEDS_PACKED
                            ? "this kernel reads no variable-length batch"
                            : "a KV cache, or a variable-length batch without its totals (total_q, total_k), is read "
                              "by the split-key kernels only");
    l->params = *p;
    l->args[0] = &l->params;
    l->args[1] = &l->maps[0];
    l->args[2] = &l->maps[1];
    l->args[3] = &l->maps[2];
    l->args[4] = &l->maps[3];
    ft__fwd_params_problem(p, &prob);
    rc = fwd_plan_of(k, &prob, &l->plan, err);
    if (rc != FT_OK || l->plan.nsteps == 0)
        return rc; /* nothing to compute: grid 0 */
    l->params.splits = l->plan.splits;
    if (l->plan.workspace_bytes == 0) /* the kernels read a workspace only where the plan uses one */
        l->params.ws = NULL, l->params.ws_bytes = 0;
    for (i = 0; l->plan.steps[i].kind != FT_STEP_KERNEL && i + 1 < l->plan.nsteps; i++)
        ; /* the main kernel: the first kernel step (a memset may come before it) */
    memcpy(l->grid, l->plan.steps[i].grid, sizeof l->grid);
    if (!f->tma)
        return FT_OK;
    if (cu->p_cuTensorMapEncodeTiled == NULL) {
        l->grid[0] = 0;
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the CUDA driver has no cuTensorMapEncodeTiled (CUDA 12 or newer)");
    }
    pack = ft__fwd_pack(f, &prob); /* the plan's grid follows it too */
    if ((rc = encode_fwd_map(cu, &l->maps[0], p->q, f, p->seqlen_q, p->heads_q, p->batch,
                             p->cu_seqlens_q != NULL ? p->total_q : 0, p->q_batch_stride, p->q_row_stride,
                             p->q_head_stride, f->rows_per_block, pack, "Q", err)) != FT_OK ||
        (rc = encode_fwd_map(cu, &l->maps[1], p->k, f, p->seqlen_k, p->heads_kv, p->batch,
                             p->cu_seqlens_k != NULL ? p->total_k : 0, p->k_batch_stride, p->k_row_stride,
                             p->k_head_stride, f->tma_rows_kv, 1, "K", err)) != FT_OK ||
        (rc = encode_fwd_map(cu, &l->maps[2], p->v, f, p->seqlen_k, p->heads_kv, p->batch,
                             p->cu_seqlens_k != NULL ? p->total_k : 0, p->v_batch_stride, p->v_row_stride,
                             p->v_head_stride, f->tma_rows_kv, 1, "V", err)) != FT_OK ||
        (f->tma_o && (rc = encode_fwd_map(cu, &l->maps[3], p->o, f, p->seqlen_q, p->heads_q, p->batch,
                                          p->cu_seqlens_q != NULL ? p->total_q : 0, p->o_batch_stride,
                                          p->o_row_stride, p->o_head_stride, FT_TMA_O_ROWS, pack, "O", err)) != FT_OK))
        l->grid[0] = 0;
    return rc;
}

ft_status ft__kernel_launch_prepared(const ft_cuda *cu, const ft_kernel *k, ft_launch *l, CUstream stream,
                                     ft_err *err)
{
    if (l->grid[0] == 0)
        return FT_OK;
    return run_steps(cu, k, &l->plan, l->args, (CUdeviceptr)(uintptr_t)l->params.ws, stream, err);
}

ft_status ft__kernel_launch_fwd(const ft_cuda *cu, const ft_kernel *k, const ft_fwd_params *p,
                                CUstream stream, ft_err *err)
{
    ft_launch l;
    ft_status rc = ft__kernel_prepare(cu, k, p, &l, err);

    if (rc != FT_OK)
        return rc;
    return ft__kernel_launch_prepared(cu, k, &l, stream, err);
}
