/* The launch of a plan's steps (runtime/kernel.c) against a made-up driver, no GPU: every memset
 * and kernel launch is recorded, so the order, the workspace addresses and the kernel arguments
 * can be checked. The forward's block counter (balance=2) is zeroed before its kernel, at the
 * start of the call's workspace, and the kernel sees that workspace; without one, or for a kernel
 * that uses none, no memset and a NULL workspace in the kernel's parameters. The backward's plan
 * runs its memsets and kernels in the plan's order, and a step naming a kernel that is not loaded
 * stops it. A forward kernel that stores O through TMA (ostore) gets a fourth tensor map, of O
 * (its pointer and strides, boxes of one warpgroup's 64 rows; a variable-length batch's packed
 * rows), the others three and zeros in its place. */
#include <stdint.h>
#include <string.h>

#include "ft_test.h"
#include "ops/op.h"
#include "runtime/kernel.h"

typedef struct call {
    int memset;         /* 1: a memset, 0: a launch */
    CUdeviceptr ptr;    /* memset: where */
    size_t bytes;       /* memset: how much */
    CUfunction fn;      /* launch: which */
    unsigned grid;      /* launch: gridDim.x */
    const void *ws;     /* launch of a forward kernel: the workspace its parameters hold */
} call;

typedef struct map_call {
    const void *ptr;
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4];
} map_call;

static call calls[16];
static int ncalls;
static map_call maps[8];
static int nmaps;
static int forward; /* the launches' first argument is an ft_fwd_params */

static CUresult CUDAAPI memset_async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)v, (void)s;
    if (ncalls < 16)
        calls[ncalls].memset = 1, calls[ncalls].ptr = p, calls[ncalls].bytes = n;
    ncalls++;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream s, void **args, void **extra)
{
    (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s, (void)extra;
    if (ncalls < 16) {
        calls[ncalls].memset = 0, calls[ncalls].fn = f, calls[ncalls].grid = gx;
        calls[ncalls].ws = forward ? ((const ft_fwd_params *)args[0])->ws : NULL;
    }
    ncalls++;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI encode(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank, void *ptr,
                               const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                               const cuuint32_t *estrides, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                               CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    (void)t, (void)estrides, (void)il, (void)sw, (void)l2, (void)oob;
    if (rank != 4)
        return CUDA_ERROR_INVALID_VALUE;
    if (nmaps < 8) {
        maps[nmaps].ptr = ptr;
        memcpy(maps[nmaps].dims, dims, sizeof maps[nmaps].dims);
        memcpy(maps[nmaps].strides, strides, sizeof maps[nmaps].strides);
        memcpy(maps[nmaps].box, box, sizeof maps[nmaps].box);
    }
    nmaps++;
    memset(map, 0, sizeof *map);
    memcpy(map, &nmaps, sizeof nmaps); /* which encode made it */
    return CUDA_SUCCESS;
}

static void fake_driver(ft_cuda *cu)
{
    memset(cu, 0, sizeof *cu);
    cu->p_cuMemsetD8Async = memset_async;
    cu->p_cuLaunchKernel = launch;
    cu->p_cuTensorMapEncodeTiled = encode;
    ncalls = 0;
    nmaps = 0;
}

/* An sm_90a forward kernel of 128-row blocks at d = 128, 132 blocks resident. */
static void fwd_kernel(ft_kernel *k, int block_counter)
{
    memset(k, 0, sizeof *k);
    k->nfns = 1, k->fns[0] = (CUfunction)(uintptr_t)0x10;
    k->facts.threads = 384, k->facts.smem_dynamic = 200000, k->facts.rows_per_block = 128;
    k->facts.head_dim = 128, k->facts.tma = 1, k->facts.tma_rows_kv = 128, k->facts.tma_span = 64;
    k->facts.persistent = 1, k->facts.block_counter = block_counter, k->facts.max_resident = 132;
}

/* Dense bf16 [batch 2, 1000 rows, 4 heads, 128]: 8 row blocks a head, 64 in all. */
static void fwd_params(ft_fwd_params *p, void *ws, int64_t ws_bytes)
{
    static uint16_t dummy[8];
    memset(p, 0, sizeof *p);
    p->q = p->k = p->v = dummy, p->o = dummy;
    p->batch = 2, p->heads_q = p->heads_kv = 4, p->seqlen_q = p->seqlen_k = 1000;
    p->q_row_stride = p->k_row_stride = p->v_row_stride = p->o_row_stride = 4 * 128;
    p->q_head_stride = p->k_head_stride = p->v_head_stride = p->o_head_stride = 128;
    p->q_batch_stride = p->k_batch_stride = p->v_batch_stride = p->o_batch_stride = 1000 * 4 * 128;
    p->scale = 1, p->scale_log2 = 1.4426950408889634f;
    p->ws = ws, p->ws_bytes = ws_bytes;
}

static void test_fwd_block_counter(void)
{
    ft_cuda cu;
    ft_kernel k;
    ft_fwd_params p;
    ft_err err;
    float *const ws = (float *)(uintptr_t)0x5000;

    forward = 1;
    /* with a workspace: the counter zeroed, then the kernel, which gets that workspace */
    fake_driver(&cu);
    fwd_kernel(&k, 1);
    fwd_params(&p, ws, 256);
    ASSERT_OK(ft__kernel_launch_fwd(&cu, &k, &p, NULL, &err), &err);
    ASSERT_EQ(ncalls, 2);
    ASSERT_TRUE(calls[0].memset && calls[0].ptr == (CUdeviceptr)(uintptr_t)ws);
    ASSERT_EQ(calls[0].bytes, FT_BLOCK_COUNTER_BYTES);
    ASSERT_TRUE(!calls[1].memset && calls[1].fn == k.fns[0] && calls[1].ws == ws);
    ASSERT_EQ(calls[1].grid, 64);
    /* without one: the kernel alone, and no workspace in its parameters */
    fake_driver(&cu);
    fwd_params(&p, NULL, 0);
    ASSERT_OK(ft__kernel_launch_fwd(&cu, &k, &p, NULL, &err), &err);
    ASSERT_EQ(ncalls, 1);
    ASSERT_TRUE(!calls[0].memset && calls[0].ws == NULL);
    /* a kernel that uses none, given one: no memset, and NULL in its parameters */
    fake_driver(&cu);
    fwd_kernel(&k, 0);
    fwd_params(&p, ws, 256);
    ASSERT_OK(ft__kernel_launch_fwd(&cu, &k, &p, NULL, &err), &err);
    ASSERT_EQ(ncalls, 1);
    ASSERT_TRUE(!calls[0].memset && calls[0].ws == NULL);
}

static void test_bwd_plan_order(void)
{
    ft_cuda cu;
    ft_kernel k;
    ft_bwd_params p;
    ft_launch_plan plan;
    ft_err err;

    forward = 0;
    fake_driver(&cu);
    memset(&k, 0, sizeof k);
    k.nfns = 2, k.fns[0] = (CUfunction)(uintptr_t)0x10, k.fns[1] = (CUfunction)(uintptr_t)0x20;
    memset(&p, 0, sizeof p);
    memset(&plan, 0, sizeof plan);
    plan.nsteps = 3;
    plan.steps[0].kind = FT_STEP_MEMSET, plan.steps[0].ws_offset = 64, plan.steps[0].ws_bytes = 100;
    plan.steps[1].kind = FT_STEP_KERNEL, plan.steps[1].kernel = 1, plan.steps[1].grid[0] = 7;
    plan.steps[2].kind = FT_STEP_KERNEL, plan.steps[2].kernel = 0, plan.steps[2].grid[0] = 9;
    ASSERT_OK(ft__kernel_run_plan(&cu, &k, &plan, &p, 0x9000, NULL, &err), &err);
    ASSERT_EQ(ncalls, 3);
    ASSERT_TRUE(calls[0].memset && calls[0].ptr == 0x9000 + 64 && calls[0].bytes == 100);
    ASSERT_TRUE(!calls[1].memset && calls[1].fn == k.fns[1] && calls[1].grid == 7);
    ASSERT_TRUE(!calls[2].memset && calls[2].fn == k.fns[0] && calls[2].grid == 9);
    /* a step naming a kernel that is not loaded: an internal error, nothing after it */
    fake_driver(&cu);
    plan.steps[1].kernel = 3;
    ASSERT_EQ(ft__kernel_run_plan(&cu, &k, &plan, &p, 0x9000, NULL, &err), FT_ERR_INTERNAL);
    ASSERT_EQ(ncalls, 1);
}

static int map_number(const CUtensorMap *m)
{
    int n;
    memcpy(&n, m, sizeof n);
    return n;
}

static void test_fwd_o_map(void)
{
    static uint16_t q[8], k_[8], v[8], o[8];
    static const int cu_seqlens[3] = {0, 700, 1300};
    ft_cuda cu;
    ft_kernel k;
    ft_fwd_params p;
    ft_launch l;
    ft_err err;
    int i;

    forward = 1;
    /* without ostore: Q, K and V, and O's place zeros */
    fake_driver(&cu);
    fwd_kernel(&k, 0);
    fwd_params(&p, NULL, 0);
    p.q = q, p.k = k_, p.v = v, p.o = o;
    p.o_row_stride = 8 * 128, p.o_head_stride = 2 * 128, p.o_batch_stride = 1000 * 8 * 128;
    ASSERT_OK(ft__kernel_prepare(&cu, &k, &p, &l, &err), &err);
    ASSERT_EQ(nmaps, 3);
    ASSERT_TRUE(maps[0].ptr == q && maps[1].ptr == k_ && maps[2].ptr == v);
    ASSERT_TRUE(l.args[1] == &l.maps[0] && l.args[4] == &l.maps[3]);
    for (i = 0; i < (int)sizeof l.maps[3]; i++)
        ASSERT_EQ(((const unsigned char *)&l.maps[3])[i], 0);
    /* with it: O's map too, its strides in bytes, 64-row boxes as wide as Q's */
    fake_driver(&cu);
    k.facts.tma_o = 1;
    ASSERT_OK(ft__kernel_prepare(&cu, &k, &p, &l, &err), &err);
    ASSERT_EQ(nmaps, 4);
    ASSERT_TRUE(maps[3].ptr == o);
    ASSERT_EQ(map_number(&l.maps[3]), 4);
    ASSERT_TRUE(l.args[4] == &l.maps[3]);
    ASSERT_EQ(maps[3].dims[0], 128);
    ASSERT_EQ(maps[3].dims[1], 1000);
    ASSERT_EQ(maps[3].dims[2], 4);
    ASSERT_EQ(maps[3].dims[3], 2);
    ASSERT_EQ(maps[3].strides[0], 8 * 128 * 2);
    ASSERT_EQ(maps[3].strides[1], 2 * 128 * 2);
    ASSERT_EQ(maps[3].strides[2], 1000 * 8 * 128 * 2);
    ASSERT_EQ(maps[3].box[0], 64);
    ASSERT_EQ(maps[3].box[1], FT_TMA_O_ROWS);
    ASSERT_EQ(maps[0].box[1], 128); /* Q's: the block's rows */
    /* a variable-length batch: O's packed rows as one batch */
    fake_driver(&cu);
    k.facts.packed = 1;
    p.cu_seqlens_q = p.cu_seqlens_k = cu_seqlens, p.total_q = p.total_k = 1300;
    ASSERT_OK(ft__kernel_prepare(&cu, &k, &p, &l, &err), &err);
    ASSERT_EQ(nmaps, 4);
    ASSERT_EQ(maps[3].dims[1], 1300);
    ASSERT_EQ(maps[3].dims[3], 1);
}

FT_TEST_MAIN(FT_CASE(test_fwd_block_counter), FT_CASE(test_bwd_plan_order), FT_CASE(test_fwd_o_map))
