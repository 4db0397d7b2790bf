/*
 * Verification: inputs on the GPU, the reference, and the comparison every variant must pass
 * before any timing counts.
 *
 * The GPU reference (templates/reference.cuh) computes attention in fp32; the CPU reference
 * computes it in fp64 for small shapes and checks the GPU one. Outputs are poisoned with NaN
 * before every launch and every element is compared: NaN or Inf where the reference is
 * finite never passes, and a row the reference leaves empty (LSE = +inf) must be +inf too.
 */
#ifndef FT_RUNTIME_VERIFY_H
#define FT_RUNTIME_VERIFY_H

#include <stdint.h>

#include "common/error.h"
#include "generator/arch.h"
#include "runtime/compile.h"
#include "runtime/driver.h"
#include "runtime/kernel.h"
#include "ops/op.h"

/* Error bounds per dtype (ft_tolerance, ops/op.h). O passes when its relative L2 error is at
 * most `l2` and every element satisfies |o - ref| <= rtol·|ref| + ptol·mag + atol·rms(ref), where
 * mag = sum_j p_j |v_j| / sum_j p_j (the reference computes it); the LSE when every row
 * satisfies |lse - ref| <= lse_abs + lse_rel·|ref|.
 * Reasoning: a kernel rounds P to 16 bits before P·V, an error of up to half an ulp of each p_j
 * (2^-12 relative in fp16, 2^-9 in bf16) times |v_j|, so at most 2^-12·mag (fp16) or 2^-9·mag
 * (bf16); it rounds the output too (the same fractions of |o|). The bounds allow about five
 * times that. Scores and sums are fp32 on both sides, so the LSE is close to exact. The
 * forward operation's tolerance (ft__op_fwd.tolerance, ops/fwd.c) holds these numbers. */

typedef struct ft_check {
    int pass;
    double o_rel_l2;          /* ||o - ref|| / ||ref|| */
    double o_max_abs;         /* max |o - ref| */
    double o_worst;           /* max |o - ref| / (rtol·|ref| + atol·rms): > 1 fails */
    double lse_max_err;       /* max |lse - ref| over finite rows */
    long long nonfinite;      /* NaN/Inf outputs where the reference is finite */
    long long bad;            /* elements over their bound (O and LSE) */
    char detail[256];         /* the first failure, in words */
} ft_check;

/* Compares a kernel's O (16-bit, with its strides) and LSE (fp32 [b, hq, sq]) with the
 * reference's O and mag (fp32, [b, sq, hq, d] contiguous) and LSE. Host memory. */
void ft__check_outputs(const ft_problem *p, const uint16_t *o, ft_strides o_strides, const float *lse,
                       const float *o_ref, const float *mag_ref, const float *lse_ref, ft_check *out);

/* fp64 attention on the host. q, k, v point at the first element of each tensor with its
 * strides; o and mag ([b, sq, hq, d], mag may be NULL) and lse ([b, hq, sq]) are written
 * contiguously. */
void ft__reference_cpu(const ft_problem *p, const uint16_t *q, ft_strides qs, const uint16_t *k,
                       ft_strides ks, const uint16_t *v, ft_strides vs, double *o, double *mag, double *lse);

/* The fp64 backward on the host, with the contract of the backward operation (ops/bwd.c):
 * in = {q, k, v, o, dout} with their strides st (o the forward's output as the kernels are given
 * it), lse the forward's fp32 [b, hq, sq] LSE (+inf for a row that sees no key). Writes dQ to
 * out[0] as [b, sq, hq, d] and dK, dV to out[1], out[2] as [b, sk, hkv, d], contiguous, and,
 * where mag is not NULL, the sums of the absolute values of each gradient's terms likewise
 * (mag[i] may each be NULL). */
void ft__reference_cpu_bwd(const ft_problem *p, const uint16_t *const in[5], const ft_strides st[5], const float *lse,
                           double *const out[3], double *const mag[3]);

/* The reference kernels, compiled for the device and loaded into the current context. */
typedef struct ft_verifier {
    const ft_cuda *cu;
    ft_arch dev;
    CUmodule module;
    CUfunction attention;
    CUfunction fill;
    CUfunction compare;
    CUfunction sumsq;
    /* the backward's (runtime/verify_bwd.c) */
    CUfunction to_half;
    CUfunction bwd_dsum, bwd_dq, bwd_dkv, bwd_compare;
    /* the forward reference's scores of rows too long for shared memory, grown as needed */
    CUdeviceptr scores;
    size_t scores_bytes;
} ft_verifier;

/* The most global memory the forward reference takes for scores (rows of seqlen_k past what a
 * block's shared memory holds): 4 GB. */
#define FT_REF_SCORES_MAX ((size_t)4 << 30)

ft_status ft__verifier_init(const ft_cuda *cu, const ft_arch *dev, ft_cache *cache, ft_verifier *out,
                            ft_err *err);
void ft__verifier_free(ft_verifier *v);

/* Device buffers of one problem: inputs in the problem's layout, O, LSE, and the fp32
 * reference outputs. */
typedef struct ft_tensors {
    ft_problem problem;
    ft_layout_plan plan;
    CUdeviceptr buf[4];       /* Q (or packed QKV), K, V, O; unused ones 0 */
    CUdeviceptr lse;          /* fp32 [b, hq, sq] */
    CUdeviceptr o_ref;        /* fp32 [b, sq, hq, d] */
    CUdeviceptr lse_ref;
    CUdeviceptr mag_ref;      /* fp32 [b, sq, hq, d]: sum_j p_j |v_j| / sum_j p_j */
    CUdeviceptr stats;        /* 8 doubles for the GPU comparison */
    double ref_sumsq;         /* sum of squares of the reference O */
    int have_reference;
    CUdeviceptr ws;           /* the launch plan's workspace (split-key kernels), ws_bytes of it */
    size_t ws_bytes;
    /* A KV cache (ft__tensors_kv_cache): the kernels read K and V from pools of pages in the
     * order kv_table gives and only the first kv_used[b] keys of sequence b; the reference reads
     * the dense K and V of buf[1], buf[2] and the same lengths. kv_used 0: none. */
    int kv_page;              /* keys per page; 0: packed keys (kv_table is then cu_seqlens_k) */
    int kv_table_stride;      /* pages per sequence */
    CUdeviceptr kv_pool[2];   /* K's and V's pools [pages, kv_page, heads_kv, d] */
    CUdeviceptr kv_table;     /* int32 [batch][kv_table_stride] */
    CUdeviceptr kv_used;      /* int32 [batch] */
    int kv_lengths[4];        /* the first sequences' lengths, for messages */
    int kv_total;             /* packed keys: their rows (cu_seqlens_k[batch]), passed as total_k */
    /* The KV-cache twin of these tensors that split-key kernels are verified on as well, and the
     * packed-keys twin of kernels that read variable-length batches (each made at the first such
     * kernel, kept for the next ones; NULL until then). */
    struct ft_tensors *kv_twin;
    struct ft_tensors *packed_twin;
} ft_tensors;

/* Makes tensors t (BSHD, filled, no KV cache yet) a KV-cache call: pages of page_size keys (a
 * multiple of 16) copied from the dense K and V into pools in an order shuffled from seed, with a
 * spare page of NaN that no sequence uses and NaN past each sequence's last key; sequence 1's first
 * page is sequence 0's (the dense rows made equal first); the lengths are the whole cache
 * (sequence 0), a page plus one (sequence 1), 0, 1, a page, then random, each at most seqlen_k.
 * Invalidates the reference. */
ft_status ft__tensors_kv_cache(ft_verifier *v, ft_tensors *t, int page_size, uint64_t seed, ft_err *err);

/* Makes tensors t (BSHD, filled) a call whose keys are packed (a variable-length batch's
 * cu_seqlens_k; the queries stay in their batch slots): each sequence's first keys, of the
 * lengths ft__tensors_kv_cache gives for pages of 64, one after another in kv_pool, NaN past the
 * last; kv_table holds cu_seqlens_k, kv_used the lengths (for the reference). Invalidates the
 * reference. */
ft_status ft__tensors_packed_keys(ft_verifier *v, ft_tensors *t, uint64_t seed, ft_err *err);

ft_status ft__tensors_create(const ft_cuda *cu, const ft_problem *p, ft_tensors *t, ft_err *err);
void ft__tensors_destroy(const ft_cuda *cu, ft_tensors *t);

/* The kernel argument block for these tensors (with their workspace). */
void ft__tensors_params(const ft_tensors *t, ft_fwd_params *out);

/* Grows the tensors' workspace to what kernel k's launch plan wants for them (nothing for most
 * kernels): call before ft__tensors_params for a kernel that may split its keys. */
ft_status ft__tensors_workspace(const ft_cuda *cu, ft_tensors *t, const ft_kernel *k, ft_err *err);

/* Fills Q and K with N(0, qk_std²) and V with N(0, 1) from a seed (a large qk_std makes
 * scores in the hundreds, to exercise the safe softmax); invalidates the reference. */
ft_status ft__tensors_fill(ft_verifier *v, ft_tensors *t, uint64_t seed, float qk_std, ft_err *err);

/* Fills n 16-bit elements at ptr with N(0, stddev²) from a seed (asynchronously). */
ft_status ft__verify_fill(ft_verifier *v, CUdeviceptr ptr, size_t n, uint64_t seed, float stddev, int bf16,
                          ft_err *err);

/* The sum of the squares of n fp32 values at x, on the GPU, into *out (NaN when one of them is
 * NaN, +inf when one is infinite); scratch: 8 bytes of device memory it may overwrite. Waits. */
ft_status ft__verify_sumsq(ft_verifier *v, CUdeviceptr x, size_t n, CUdeviceptr scratch, double *out, ft_err *err);

/* Launches the reference forward for inputs in (q, k, v, their strides and the softmax scale,
 * which must be set: FT_ERR_INTERNAL otherwise) of problem p: O (fp32, contiguous
 * [b, sq, hq, d]), its mag likewise and the LSE ([b, hq, sq]); does not wait. */
ft_status ft__reference_forward(ft_verifier *v, const ft_problem *p, const ft_fwd_params *in, CUdeviceptr o,
                                CUdeviceptr lse, CUdeviceptr mag, ft_err *err);

/* Computes the reference outputs for the current inputs (once per fill). */
ft_status ft__tensors_reference(ft_verifier *v, ft_tensors *t, ft_err *err);

/* Poisons O and LSE with NaN, launches the kernel, waits, and compares every element with
 * the reference. A launch or execution error is returned (FT_ERR_CUDA); a wrong result is
 * FT_OK with check->pass = 0. A split-key kernel (the only ones that take a KV cache) that
 * passes is checked again on the tensors' KV-cache twin (ft__tensors_kv_cache, made at the first
 * such kernel): for an odd seqlen_k the keys packed as a variable-length batch's, else pages of
 * 16, 48, 64 or 256 keys by the problem's size; at least 3 sequences, lengths of their own. Any
 * other kernel that reads variable-length batches (launch facts packed) is checked again on
 * packed keys likewise, given their total. */
ft_status ft__verify_kernel(ft_verifier *v, const ft_kernel *k, ft_tensors *t, ft_check *check,
                            ft_err *err);

/* The same check with the comparison on the GPU (ft_ref_compare): only a few numbers cross to
 * the host, which matters for the tuner's large shapes. The detail names counts and the
 * worst errors rather than the first bad element. */
ft_status ft__verify_kernel_gpu(ft_verifier *v, const ft_kernel *k, ft_tensors *t, ft_check *check,
                                ft_err *err);

/* ---- the backward (runtime/verify_bwd.c) ---------------------------------------------------
 * The inputs Q, K, V and dO are random; O and the LSE are the fp32 reference forward's (O
 * rounded to 16 bits, as a forward kernel hands it on); the reference gradients, their term
 * magnitudes and the scale of the cancellation in dP − D come from the fp32 GPU reference
 * (templates/reference.cuh), itself checked against the fp64 CPU one (tests/bwd) and that
 * against central differences (test_bwd). A kernel's gradients and its whole workspace are
 * poisoned before it runs; each gradient passes by the backward operation's bounds (ops/bwd.c);
 * NaN or Inf never passes; rows that see no key must give exactly 0; a deterministic kernel
 * runs twice and must give the same bits. */

typedef struct ft_bwd_check {
    int pass;
    double rel_l2[3];         /* dQ, dK, dV: ||x − ref|| / ||ref|| */
    double worst[3];          /* max |x − ref| / its bound: > 1 fails */
    long long nonfinite;      /* NaN/Inf gradients */
    long long bad;            /* elements over their bound, non-finite ones included */
    long long nonzero_empty;  /* non-zero dQ in rows that see no key */
    int det_same;             /* -1: not a deterministic kernel; else 1 when two runs gave the same bits */
    char detail[256];         /* the first failure, in words */
} ft_bwd_check;

/* Device buffers of one backward problem (layout bshd or bhsd) and its reference. */
typedef struct ft_bwd_tensors {
    ft_problem problem;
    ft_strides sq, sk;        /* of Q, O, dO, dQ and of K, V, dK, dV */
    size_t nq, nk;            /* elements of each */
    CUdeviceptr q, k, v, o, dout, dq, dk, dv, lse;
    CUdeviceptr o32, mag_o, dsum;        /* the reference forward's O (fp32), its mag; D, then
                                            |D|₁ = Σ|dO ∘ O| (fp32 [2][b·hq·sq]) */
    CUdeviceptr ref[3], mag[3], cmag[2]; /* fp32, contiguous [b, s, h, d]: dQ, dK, dV */
    CUdeviceptr stats;        /* 8 doubles for the GPU comparison */
    CUdeviceptr ws;           /* the kernels' workspace, ws_cap bytes, grown as needed */
    size_t ws_cap;
    double ref_sumsq[3];
    int have_reference;
} ft_bwd_tensors;

ft_status ft__bwd_tensors_create(const ft_cuda *cu, const ft_problem *p, ft_bwd_tensors *t, ft_err *err);
void ft__bwd_tensors_destroy(const ft_cuda *cu, ft_bwd_tensors *t);

/* Random inputs from a seed (Q and K with N(0, qk_std²), V and dO with N(0, 1)), the forward
 * by the reference and the reference gradients; waits for them. */
ft_status ft__bwd_tensors_prepare(ft_verifier *v, ft_bwd_tensors *t, uint64_t seed, float qk_std, ft_err *err);

/* Inputs for timing only, without the reference (which reads every key for every query row:
 * seconds on the largest shapes): Q, K, V and dO as ft__bwd_tensors_prepare makes them, O
 * random, and the LSE that random inputs give on average, ln(keys the row sees) + qk_std⁴/2
 * (+inf for a row that sees none), so the kernels' exponentials are of their usual size. The
 * tensors cannot verify a kernel (have_reference stays 0); waits. */
ft_status ft__bwd_tensors_fill_timing(ft_verifier *v, ft_bwd_tensors *t, uint64_t seed, float qk_std, ft_err *err);

/* The kernels' argument block for these tensors. */
void ft__bwd_tensors_params(const ft_bwd_tensors *t, ft_bwd_params *out);

/* Compares the gradients the tensors' dq, dk and dv hold now with the reference, by the
 * operation's bounds (check->det_same is left -1). A wrong result is FT_OK with check->pass = 0. */
ft_status ft__bwd_check_gradients(ft_verifier *v, ft_bwd_tensors *t, ft_bwd_check *check, ft_err *err);

/* One backward call of kernel k on these tensors as the work ft__time repeats (pass
 * ft__bwd_launch_fn and a pointer to one): the operation's plan for k, the argument block, and
 * the tensors' workspace, grown to the plan's size. */
typedef struct ft_bwd_launch {
    const ft_cuda *cu;
    const ft_kernel *k;
    ft_launch_plan plan;
    ft_bwd_params params;
    CUdeviceptr ws;
} ft_bwd_launch;

ft_status ft__bwd_tensors_launch(const ft_cuda *cu, const ft_kernel *k, ft_bwd_tensors *t, ft_bwd_launch *out,
                                 ft_err *err);
ft_status ft__bwd_launch_fn(void *launch, CUstream stream, ft_err *err);

/* Poisons the gradients and the workspace, runs the backward operation's launch plan for k
 * (which ft__kernel_load_entries gave its three functions), waits, and compares; a
 * deterministic kernel a second time. A launch or execution error is returned (FT_ERR_CUDA);
 * a wrong result is FT_OK with check->pass = 0. */
ft_status ft__verify_bwd_kernel(ft_verifier *v, const ft_kernel *k, ft_bwd_tensors *t, ft_bwd_check *check,
                                ft_err *err);

#endif
