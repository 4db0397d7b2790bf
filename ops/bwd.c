/*
 * The backward operation: dQ, dK and dV of O = softmax(scale·Q·Kᵀ)·V, from Q, K, V, the
 * forward's O and LSE, and dO, by recomputing the probabilities (the FlashAttention-2 scheme):
 *   P = exp(scale·S − LSE), S = Q·Kᵀ;  dV = Pᵀ·dO;  dP = dO·Vᵀ;  D = rowsum(dO ∘ O);
 *   dS = P ∘ (dP − D);  dQ = scale·dS·K;  dK = scale·dSᵀ·Q.
 * With grouped-query heads, dK and dV of a K/V head are sums over the query heads of its group.
 *
 * Key: the dtype, the head dim, causality, determinism (a call may ask for bitwise reproducible
 * gradients, which only some kernels give), the query heads per K/V head rounded up to a power
 * of two, the longer sequence length and batch·heads_q each rounded up to a power of two (at
 * least 64 and 1). Calls of one key run one kernel.
 *
 * Launch plan: three kernel steps, all of one block size — pre (D, LSE·log2(e), and every word
 * of the workspace initialised), main (one block per key block and head: dK, dV, and dQ's fp32
 * partial sums added into the workspace), post (dQ, and with summed dK/dV those too, converted
 * to the element type). No memset: pre writes the whole workspace, whose size the plan gives.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"

static const ft_op_tensor bwd_tensors[] = {
    {"q", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_q, heads_q, head_dim]"},
    {"k", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_k, heads_kv, head_dim]"},
    {"v", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_k, heads_kv, head_dim]"},
    {"o", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_q, heads_q, head_dim]"},
    {"lse", FT_TENSOR_INPUT, "fp32", "[batch, heads_q, seqlen_q]"},
    {"do", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_q, heads_q, head_dim]"},
    {"dq", FT_TENSOR_OUTPUT, "the call's", "[batch, seqlen_q, heads_q, head_dim]"},
    {"dk", FT_TENSOR_OUTPUT, "the call's", "[batch, seqlen_k, heads_kv, head_dim]"},
    {"dv", FT_TENSOR_OUTPUT, "the call's", "[batch, seqlen_k, heads_kv, head_dim]"},
    {"workspace", FT_TENSOR_WORKSPACE, "fp32", "the launch plan's workspace_bytes"},
};

static const char *const bwd_key_fields[] = {"d", "causal", "det", "group", "seqlen", "bh", NULL};

static ft_status bwd_validate(const ft_problem *p, ft_err *err)
{
    return ft__problem_validate(p, err);
}

static void bwd_key(const ft_problem *p, ft_key *out)
{
    const long long seqlen = p->seqlen_q > p->seqlen_k ? p->seqlen_q : p->seqlen_k;
    const long long group = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 1;
    const long long values[] = {p->head_dim,
                                p->causal != 0,
                                p->deterministic != 0,
                                ft__pow2_at_least(group, 1),
                                ft__pow2_at_least(seqlen, 64),
                                ft__pow2_at_least((long long)p->batch * p->heads_q, 1)};
    int i;

    memset(out, 0, sizeof *out);
    out->op = &ft__op_bwd;
    snprintf(out->dtype, sizeof out->dtype, "%s", p->bf16 ? "bf16" : "f16");
    for (i = 0; bwd_key_fields[i] != NULL; i++) {
        snprintf(out->fields[i].name, sizeof out->fields[i].name, "%s", bwd_key_fields[i]);
        out->fields[i].value = values[i];
    }
    out->nfields = i;
}

/* Only a kernel of the same dtype, head dim, causality and determinism can stand in. Then
 * |log2 of the sequence-length ratio| + 0.5·|log2 of the batch·heads ratio| + 0.5·|log2 of the
 * group ratio| (the group decides between walking a group's heads and summing them); a tie goes
 * to the longer sequence, as for the forward. */
static double bwd_distance(const ft_key *a, const ft_key *b)
{
    static const char *const same[] = {"d", "causal", "det"};
    double sa, sb, ba, bb, ga, gb;
    size_t i;

    if (strcmp(a->dtype, b->dtype) != 0)
        return -1;
    for (i = 0; i < sizeof same / sizeof same[0]; i++)
        if (ft__key_get(a, same[i], -1) != ft__key_get(b, same[i], -2))
            return -1;
    sa = (double)ft__key_get(a, "seqlen", 0), sb = (double)ft__key_get(b, "seqlen", 0);
    ba = (double)ft__key_get(a, "bh", 0), bb = (double)ft__key_get(b, "bh", 0);
    ga = (double)ft__key_get(a, "group", 0), gb = (double)ft__key_get(b, "group", 0);
    if (sa <= 0 || sb <= 0 || ba <= 0 || bb <= 0 || ga <= 0 || gb <= 0)
        return -1;
    return fabs(log2(sb / sa)) + 0.5 * fabs(log2(bb / ba)) + 0.5 * fabs(log2(gb / ga)) +
           (64.0 - log2(sb)) * (0.5 / 64 / 64);
}

/* 2.5 times the forward's: five products of the forward's size where the forward has two
 * (S, dP, dV, dK, dQ), the convention of the FlashAttention papers; halved when causal. */
static double bwd_flops(const ft_problem *p)
{
    double f = 10.0 * p->batch * p->heads_q * (double)p->seqlen_q * p->seqlen_k * p->head_dim;
    return p->causal ? f / 2 : f;
}

/* Q, K, V, O, dO read and dQ, dK, dV written in 16 bits, the LSE read in fp32. */
static double bwd_bytes(const ft_problem *p)
{
    double q = (double)p->batch * p->seqlen_q * p->heads_q * p->head_dim;
    double kv = (double)p->batch * p->seqlen_k * p->heads_kv * p->head_dim;
    return 2.0 * (4 * q + 4 * kv) + 4.0 * p->batch * p->heads_q * p->seqlen_q;
}

/* The bounds of each gradient, with u the unit roundoff of the element type (2^-11 for fp16,
 * 2^-8 for bf16):
 *   dV = Σ_i P·dO_i: the kernel rounds P to 16 bits (u·P each), and its P differs from the
 *   reference's by the fp32 error of its score — about 2u·mag in all;
 *   dK and dQ: dS is rounded to 16 bits (u·|dS|) and inherits P's relative error — about 2u·mag
 *   (3u where dS is made from P already rounded to 16 bits: flash_bwd_sm90's early_dv=3);
 *   dP − D cancels where the softmax saturates or a row sees one key (then dP = D exactly), and
 *   is the difference of two fp32 sums of d products, off by about d·2^-24 times the sum of
 *   their products' magnitudes on either side (|dP|₁ = Σ|dO_c v_c|, |D|₁ = Σ|dO_c O_c|; a bound
 *   on |dP| + |D| alone fails where those sums cancel, seen at d = 144 with one key):
 *   ctol·cmag, cmag = scale·Σ P·(|dP|₁ + |D|₁)·|k| (or |q|);
 *   the output is rounded once more (u·|ref|).
 * The bounds allow about twice that: l2 = rtol = ptol = 4u, ctol = 2^-18 (16 ulps of fp32 on
 * both sums); atol, in units of the tensor's rms, covers elements whose reference and mags all
 * vanish. Measured on an H200 (tests/bwd/README.md): the worst element at 0.23 of its bound. */
static ft_tolerance bwd_tolerance(int bf16)
{
    static const ft_tolerance f16 = {2e-3, 2e-3, 2e-3, 1e-3, 0, 0, 3.8e-6};
    static const ft_tolerance b16 = {1.6e-2, 1.6e-2, 1.6e-2, 4e-3, 0, 0, 3.8e-6};
    return bf16 ? b16 : f16;
}

/* The workspace of templates/flash_bwd_sm80.cuh and flash_bwd_sm90.cuh, in bytes, each region
 * following the last: dQ's fp32 partial sums (one tile per query block, bm rows by the head dim,
 * or by the tiles' width where the kernel rounds it up), LSE·log2(e) and D per padded query
 * row, with summed dK/dV their fp32 sums per padded key row (as wide), with determinism a counter per dQ
 * tile (and per dK/dV tile when summed). Rounded up to 256 bytes. */
static long long bwd_workspace(const ft_launch_facts *f, const ft_problem *p, long long mbq, long long nbk,
                               int kv_sum)
{
    const long long bhq = (long long)p->batch * p->heads_q, bhkv = (long long)p->batch * p->heads_kv;
    const long long sqp = mbq * f->rows_per_block, skp = nbk * f->keys_per_block;
    const long long width = f->tile_dim > 0 ? f->tile_dim : f->head_dim;
    long long bytes = 4 * bhq * sqp * (width + 2);

    if (kv_sum)
        bytes += 8 * bhkv * skp * width;
    if (f->deterministic)
        bytes += 4 * bhq * mbq + (kv_sum ? 4 * bhkv * nbk : 0);
    return (bytes + 255) / 256 * 256;
}

static void kernel_step(ft_launch_step *s, int kernel, long long gx, long long gy, long long gz,
                        const ft_launch_facts *f, unsigned smem)
{
    s->kind = FT_STEP_KERNEL;
    s->kernel = kernel;
    s->grid[0] = (unsigned)gx, s->grid[1] = (unsigned)gy, s->grid[2] = (unsigned)gz;
    s->block = (unsigned)f->threads;
    s->smem = smem;
}

/* The family's entries: 0 the main kernel, 1 pre, 2 post (generator/family.c). */
static ft_status bwd_plan(const ft_launch_facts *f, const ft_problem *p, ft_launch_plan *out, ft_err *err)
{
    long long mbq, nbk, heads_main, ws;
    int kv_sum;

    memset(out, 0, sizeof *out);
    if (f->rows_per_block <= 0 || f->keys_per_block <= 0 || f->threads <= 0 || f->head_dim <= 0)
        return ft__fail(err, FT_ERR_INTERNAL, "a backward kernel without rows or keys per block, threads or head dim");
    if (p->batch <= 0 || p->heads_q <= 0 || p->heads_kv <= 0 || p->seqlen_q <= 0 || p->seqlen_k <= 0)
        return FT_OK; /* nothing to compute */
    if (p->head_dim != f->head_dim)
        return ft__fail(err, FT_ERR_INTERNAL, "a kernel of head dim %d for a call of head dim %d", f->head_dim,
                        p->head_dim);
    if (p->batch > 65535 || p->heads_q > 65535)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "batch and heads must be at most 65535");
    mbq = ((long long)p->seqlen_q + f->rows_per_block - 1) / f->rows_per_block;
    nbk = ((long long)p->seqlen_k + f->keys_per_block - 1) / f->keys_per_block;
    kv_sum = f->gqa_atomic && p->heads_q > p->heads_kv;
    heads_main = f->gqa_atomic ? p->heads_q : p->heads_kv;
    ws = bwd_workspace(f, p, mbq, nbk, kv_sum);
    if (ws <= 0 || (uint64_t)ws > SIZE_MAX / 2)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the backward's workspace does not fit in memory");
    kernel_step(&out->steps[0], 1, mbq, p->heads_q, p->batch, f, 0);
    kernel_step(&out->steps[1], 0, nbk, heads_main, p->batch, f, (unsigned)f->smem_dynamic);
    kernel_step(&out->steps[2], 2, kv_sum && nbk > mbq ? nbk : mbq, p->heads_q, p->batch, f, 0);
    out->nsteps = 3;
    out->workspace_bytes = (size_t)ws;
    return FT_OK;
}

const ft_op ft__op_bwd = {
    "bwd",
    "backward: dQ, dK, dV from Q, K, V, O, the LSE and dO",
    bwd_tensors,
    (int)(sizeof bwd_tensors / sizeof bwd_tensors[0]),
    bwd_key_fields,
    bwd_validate,
    bwd_key,
    bwd_distance,
    bwd_flops,
    bwd_bytes,
    bwd_tolerance,
    bwd_plan,
    NULL, /* the key has had one form */
};
