/* Loading a compiled variant into the current context, checking it against the device,
 * and launching its kernels: the forward's one, or the steps of an operation's launch plan. */
#ifndef FT_RUNTIME_KERNEL_H
#define FT_RUNTIME_KERNEL_H

#include <stdint.h>

#include "common/error.h"
#include "generator/arch.h"
#include "ops/op.h"
#include "runtime/driver.h"

/* The flash forward kernels' argument block; templates/include/ft_params.cuh declares the same
 * fields in the same order (ft::FwdParams). Strides are in elements. */
typedef struct ft_fwd_params {
    const void *q;
    const void *k;
    const void *v;
    void *o;
    float *lse;
    int64_t q_batch_stride, q_row_stride, q_head_stride;
    int64_t k_batch_stride, k_row_stride, k_head_stride;
    int64_t v_batch_stride, v_row_stride, v_head_stride;
    int64_t o_batch_stride, o_row_stride, o_head_stride;
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k;
    float scale;
    float scale_log2;
    int32_t reserved;
    float *ws;          /* the launch plan's workspace (split-KV families), NULL: none */
    int64_t ws_bytes;   /* its size: the plan splits the keys only as far as it holds */
    int32_t splits;     /* set by the launch from the plan */
    int32_t reserved2;
    /* A KV cache (ft_attention_args version 4; the split-key families only): */
    const int32_t *seqused_k;   /* [batch] keys per sequence, NULL: seqlen_k each */
    const int32_t *block_table; /* [batch][block_table_stride] pages, NULL: K and V dense */
    int32_t page_size;
    int32_t block_table_stride;
    const int32_t *cu_seqlens_q; /* variable-length batches: [batch + 1] row offsets, NULL: none */
    const int32_t *cu_seqlens_k;
    int32_t total_q, total_k; /* rows of the packed tensors where cu_seqlens_* are given (0: not known) */
} ft_fwd_params;

_Static_assert(sizeof(ft_fwd_params) == 5 * 8 + 12 * 8 + 8 * 4 + 3 * 8 + 3 * 8 + 2 * 8 + 2 * 4, "ft_fwd_params layout");

/* The backward kernels' argument block (all three take it); templates/include/ft_params_bwd.cuh
 * declares the same fields in the same order (ft::BwdParams). Strides are in elements. */
typedef struct ft_bwd_params {
    const void *q, *k, *v, *o, *dout;
    void *dq, *dk, *dv;
    const float *lse;
    float *ws;
    int64_t q_batch_stride, q_row_stride, q_head_stride;
    int64_t k_batch_stride, k_row_stride, k_head_stride;
    int64_t v_batch_stride, v_row_stride, v_head_stride;
    int64_t o_batch_stride, o_row_stride, o_head_stride;
    int64_t dout_batch_stride, dout_row_stride, dout_head_stride;
    int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
    int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
    int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k;
    float scale;
    float scale_log2;
    int32_t reserved;
} ft_bwd_params;

_Static_assert(sizeof(ft_bwd_params) == 10 * 8 + 24 * 8 + 8 * 4, "ft_bwd_params layout");

#define FT_KERNEL_MAX_FNS 4

/* A loaded kernel: its launch facts (from its family, ft__family_launch), what the driver says
 * about it, and its functions. */
typedef struct ft_kernel {
    CUmodule module;
    CUfunction fns[FT_KERNEL_MAX_FNS]; /* fns[0] the main entry; the family's others, in its order,
                                          after ft__kernel_load_entries */
    int nfns;
    ft_launch_facts facts;    /* threads, shared memory, rows per block, tensor maps, the grid's
                                 kind; facts.max_resident set by the loader */
    int registers;            /* CU_FUNC_ATTRIBUTE_NUM_REGS */
    int local_bytes;          /* per thread: spills and stack */
    int smem_static;
    int max_threads;          /* what the registers allow per block */
    int blocks_per_sm;        /* occupancy */
} ft_kernel;

/* Loads a cubin into the current context and checks it can launch: threads within what its
 * registers allow, static + dynamic shared memory within the opt-in limit (raising the
 * dynamic limit past 48 KiB), at least one block per multiprocessor. A variant that cannot
 * launch is FT_ERR_LIMITS with the reason; a bad image is FT_ERR_CUDA. */
ft_status ft__kernel_load(const ft_cuda *cu, const void *cubin, const char *entry, const ft_launch_facts *facts,
                          const ft_arch *dev, ft_kernel *out, ft_err *err);
void ft__kernel_unload(const ft_cuda *cu, ft_kernel *k); /* module NULL is a no-op */

/* Looks up the functions of a loaded kernel's other entries (names[1..n-1]: the family's
 * entries after the main one, names[0]) in its module, raising their dynamic shared-memory
 * limit like the main one's as far as each one's static shared memory leaves room within
 * smem_limit (the device's opt-in limit per block). FT_ERR_CUDA naming the entry a cubin lacks. */
ft_status ft__kernel_load_entries(const ft_cuda *cu, ft_kernel *k, const char *const *names, int n,
                                  long long smem_limit, ft_err *err);

/* ft__kernel_load, then ft__kernel_load_entries for the family's other entries (the entry
 * followed by each suffix): every kernel a variant of fam defines, ready for its plan. */
struct ft_family;
ft_status ft__kernel_load_family(const ft_cuda *cu, const struct ft_family *fam, const void *cubin, const char *entry,
                                 const ft_launch_facts *facts, const ft_arch *dev, ft_kernel *out, ft_err *err);

/* Enqueues the steps of the backward operation's launch plan on stream: memsets of the workspace
 * ws (plan->workspace_bytes at least) and kernels, each the function of the kernel's the step
 * names, all taking the argument block params. A TMA kernel (facts.tma) takes tensor maps of Q,
 * dO, K and V after it (boxes of rows_per_block rows for Q and dO, tma_rows_kv for K and V),
 * encoded here from params (errors as for ft__kernel_launch_fwd); the kernels that do not
 * declare them ignore them. */
ft_status ft__kernel_run_plan(const ft_cuda *cu, const ft_kernel *k, const ft_launch_plan *plan,
                              const ft_bwd_params *params, CUdeviceptr ws, CUstream stream, ft_err *err);

/* The sizes of a forward call as the operation's plan reads them. */
void ft__fwd_params_problem(const ft_fwd_params *p, ft_problem *out);

/* What cuLaunchKernel takes for the steps of one forward call: the plan, the kernel arguments
 * (a copy of the params with the plan's splits, then for TMA kernels their tensor maps of Q, K, V
 * and O, which live here; O's is encoded for the kernels that store through it, facts.tma_o, and
 * zeros for the others, which ignore it) and the main step's grid. */
typedef struct ft_launch {
    ft_fwd_params params;
    CUtensorMap maps[4];
    void *args[5];
    ft_launch_plan plan;
    unsigned grid[3]; /* grid[0] == 0: nothing to compute */
} ft_launch;

/* Fills l for a call with params p: the forward operation's plan for the kernel's launch facts
 * (splitting keys only as far as p->ws_bytes of p->ws hold), and the tensor maps (errors as for
 * ft__kernel_launch_fwd). l must not move before it is launched. */
ft_status ft__kernel_prepare(const ft_cuda *cu, const ft_kernel *k, const ft_fwd_params *p, ft_launch *l,
                             ft_err *err);

/* Enqueues the steps of a prepared launch on stream (nothing when its grid is 0). */
ft_status ft__kernel_launch_prepared(const ft_cuda *cu, const ft_kernel *k, ft_launch *l, CUstream stream,
                                     ft_err *err);

/* The workspace bytes the kernel's plan wants for a call of problem p's sizes (0: none). */
ft_status ft__kernel_fwd_workspace(const ft_kernel *k, const ft_problem *p, size_t *bytes, ft_err *err);

/* Runs the forward operation's launch plan for the kernel on stream. For a TMA kernel it
 * encodes the tensor maps first (FT_ERR_UNSUPPORTED when the driver lacks
 * cuTensorMapEncodeTiled, FT_ERR_INVALID_ARGUMENT when it refuses the tensors' layout). */
ft_status ft__kernel_launch_fwd(const ft_cuda *cu, const ft_kernel *k, const ft_fwd_params *p,
                                CUstream stream, ft_err *err);

/* A kernel with its arguments, as the work ft__time repeats: pass ft__fwd_launch_fn and a
 * pointer to one of these. */
typedef struct ft_fwd_launch {
    const ft_cuda *cu;
    const ft_kernel *k;
    ft_fwd_params params;
} ft_fwd_launch;

ft_status ft__fwd_launch_fn(void *launch, CUstream stream, ft_err *err);

#endif
