/*
 * The forward operation: O = softmax(scale·Q·Kᵀ)·V per (batch, query head), and the LSE of
 * every row.
 *
 * Key: the dtype, the head dim, causality, the query heads per K/V head ("group"), the query
 * length ("sq"), the sequence length (the longer of seqlen_q and seqlen_k, at least 64) and
 * batch·heads_q, each rounded up to a power of two. Calls of one key run one kernel. A decode
 * call (seqlen_q 1 against a long seqlen_k) and a prefill of the same sequence length differ by
 * sq; keys of at most FT_FWD_SHORT_QUERY query rows are the decode kernels' (ops/op.h).
 *
 * Keys written before group and sq were fields (the database's schema 3, packs, exported kernel
 * sets) read as prefill keys of one query head per K/V head: group 1, sq = seqlen (fwd_legacy);
 * where the shape a key was measured on is stored with it, that shape's fields are taken instead
 * (ft__key_parse_shaped).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"

static const ft_op_tensor fwd_tensors[] = {
    {"q", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_q, heads_q, head_dim]"},
    {"k", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_k, heads_kv, head_dim]"},
    {"v", FT_TENSOR_INPUT, "the call's", "[batch, seqlen_k, heads_kv, head_dim]"},
    {"o", FT_TENSOR_OUTPUT, "the call's", "[batch, seqlen_q, heads_q, head_dim]"},
    {"lse", FT_TENSOR_OPTIONAL_OUTPUT, "fp32", "[batch, heads_q, seqlen_q]"},
};

static const char *const fwd_key_fields[] = {"d", "causal", "group", "sq", "seqlen", "bh", NULL};
enum { FWD_D, FWD_CAUSAL, FWD_GROUP, FWD_SQ, FWD_SEQLEN, FWD_BH };

static ft_status fwd_validate(const ft_problem *p, ft_err *err)
{
    return ft__problem_validate(p, err);
}

static void fwd_key(const ft_problem *p, ft_key *out)
{
    const long long seqlen = p->seqlen_q > p->seqlen_k ? p->seqlen_q : p->seqlen_k;
    const long long group = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 1;
    const long long values[] = {[FWD_D] = p->head_dim,
                                [FWD_CAUSAL] = p->causal != 0,
                                [FWD_GROUP] = ft__pow2_at_least(group, 1),
                                [FWD_SQ] = ft__pow2_at_least(p->seqlen_q, 1),
                                [FWD_SEQLEN] = ft__pow2_at_least(seqlen, 64),
                                [FWD_BH] = ft__pow2_at_least((long long)p->batch * p->heads_q, 1)};
    int i;

    memset(out, 0, sizeof *out);
    out->op = &ft__op_fwd;
    snprintf(out->dtype, sizeof out->dtype, "%s", p->bf16 ? "bf16" : "f16");
    for (i = 0; fwd_key_fields[i] != NULL; i++) {
        snprintf(out->fields[i].name, sizeof out->fields[i].name, "%s", fwd_key_fields[i]);
        out->fields[i].value = values[i];
    }
    out->nfields = i;
}

/* The key before group and sq were fields ({"dtype","d","causal","seqlen","bh"}): the bucket of
 * prefill calls, of one query head per K/V head, their query length the sequence length. */
static int fwd_legacy(ft_key *k, unsigned missing)
{
    if (missing != ((1u << FWD_GROUP) | (1u << FWD_SQ)))
        return 0;
    k->fields[FWD_GROUP].value = 1;
    k->fields[FWD_SQ].value = k->fields[FWD_SEQLEN].value;
    return 1;
}

/* Only a kernel of the same dtype, head dim and causality can stand in, and a short-query
 * (decode) key's only for another short-query key (FT_FWD_SHORT_QUERY). Then |log2 of the
 * sequence-length ratio| + |log2 of the query-length ratio| + 0.5·|log2 of the batch·heads
 * ratio| + 0.5·|log2 of the group ratio|; a tie goes to the longer sequence (whose kernels
 * amortise their start-up over more tiles): the distances are multiples of 0.5, so a term below
 * 0.5/64 orders equal ones by seqlen without reordering others. */
static double fwd_distance(const ft_key *a, const ft_key *b)
{
    double sa, sb, qa, qb, ba, bb, ga, gb;

    if (strcmp(a->dtype, b->dtype) != 0 || ft__key_get(a, "d", -1) != ft__key_get(b, "d", -2) ||
        ft__key_get(a, "causal", -1) != ft__key_get(b, "causal", -2))
        return -1;
    sa = (double)ft__key_get(a, "seqlen", 0), sb = (double)ft__key_get(b, "seqlen", 0);
    qa = (double)ft__key_get(a, "sq", 0), qb = (double)ft__key_get(b, "sq", 0);
    ba = (double)ft__key_get(a, "bh", 0), bb = (double)ft__key_get(b, "bh", 0);
    ga = (double)ft__key_get(a, "group", 0), gb = (double)ft__key_get(b, "group", 0);
    if (sa <= 0 || sb <= 0 || qa <= 0 || qb <= 0 || ba <= 0 || bb <= 0 || ga <= 0 || gb <= 0)
        return -1;
    if ((qa <= FT_FWD_SHORT_QUERY) != (qb <= FT_FWD_SHORT_QUERY))
        return -1;
    return fabs(log2(sb / sa)) + fabs(log2(qb / qa)) + 0.5 * fabs(log2(bb / ba)) + 0.5 * fabs(log2(gb / ga)) +
           (64.0 - log2(sb)) * (0.5 / 64 / 64);
}

/* 4·b·hq·sq·sk·d, halved when causal (the convention of the FlashAttention papers). */
static double fwd_flops(const ft_problem *p)
{
    double f = 4.0 * p->batch * p->heads_q * (double)p->seqlen_q * p->seqlen_k * p->head_dim;
    return p->causal ? f / 2 : f;
}

static double fwd_bytes(const ft_problem *p)
{
    double q = (double)p->batch * p->seqlen_q * p->heads_q * p->head_dim;
    double kv = (double)p->batch * p->seqlen_k * p->heads_kv * p->head_dim;
    return 2.0 * (2 * q + 2 * kv) + 4.0 * p->batch * p->heads_q * p->seqlen_q;
}

/* O's bounds per dtype (runtime/verify.h gives the reasoning). */
static ft_tolerance fwd_tolerance(int bf16)
{
    static const ft_tolerance f16 = {2e-3, 1.5e-3, 1.5e-3, 1e-3, 1e-3, 1e-4, 0};
    static const ft_tolerance b16 = {1.6e-2, 1e-2, 1e-2, 1e-3, 1e-3, 1e-4, 0};
    return bf16 ? b16 : f16;
}

/* The rounds of tiles of the busiest SM when blocks blocks are split into s runs of rounds rounds
 * on a device holding resident blocks at once. */
static long long split_cost(long long blocks, long long resident, long long rounds, long long s)
{
    return (blocks * s + resident - 1) / resident * ((rounds + s - 1) / s);
}

/* How many runs the keys of each row block are split into, for blocks row blocks (times heads
 * and batch) of a kernel the device holds resident blocks of at once, whose keys take a block
 * rounds rounds (a round: one tile for each of its warps): 1 when the blocks alone fill at least 80 % of the
 * device (FlashAttention-3's heuristics.h rule); else the fewest runs whose busiest SM's rounds,
 * ceil(blocks·s / resident) waves of ceil(rounds / s) rounds each, are within 5 % of the least
 * any count gets (more runs cost partial results and a longer combine), at most 128 and at least
 * two rounds a run. */
static int fwd_splits(long long blocks, long long resident, long long rounds)
{
    const long long most = rounds / 2 < 128 ? rounds / 2 : 128;
    long long s, least = rounds;

    if (blocks <= 0 || resident <= 0 || blocks * 5 >= resident * 4 || most < 2)
        return 1;
    for (s = 2; s <= most; s++)
        if (split_cost(blocks, resident, rounds, s) < least)
            least = split_cost(blocks, resident, rounds, s);
    for (s = 1; s < most && split_cost(blocks, resident, rounds, s) * 20 > least * 21; s++)
        ;
    return (int)s;
}

/* Split keys (launch facts split_kv): grid (row blocks · splits, units, batch) with units the K/V
 * heads (pack_gqa: a block's rows are a group's query heads times the queries) or the query
 * heads; with more than one split the workspace holds the partial O and LSE of every split and
 * the combine kernel (entry 1) makes O and the LSE from them, a warp per row. The splits are cut
 * to what workspace_cap holds (1 without a workspace). */
static ft_status fwd_plan_split(const ft_launch_facts *f, const ft_problem *p, ft_launch_plan *out, ft_err *err)
{
    const long long hpu = f->pack_gqa ? p->heads_q / p->heads_kv : 1;
    const long long units = f->pack_gqa ? p->heads_kv : p->heads_q;
    const long long nrb = ((long long)p->seqlen_q * hpu + f->rows_per_block - 1) / f->rows_per_block;
    const long long rows = (long long)p->batch * p->heads_q * p->seqlen_q;
    const long long per_split = rows * (p->head_dim + 1) * 4;
    long long splits;

    if (f->keys_per_block <= 0 || f->threads < 32)
        return ft__fail(err, FT_ERR_INTERNAL, "a split-key kernel without keys per round or warps");
    if (nrb * units * p->batch == 0)
        return FT_OK;
    if (units > 65535 || p->batch > 65535)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "batch and heads must be at most 65535");
    splits = fwd_splits(nrb * units * p->batch, f->max_resident,
                        ((long long)p->seqlen_k + f->keys_per_block - 1) / f->keys_per_block);
    if (splits > 1 && p->workspace_cap >= 0 && splits * per_split > p->workspace_cap)
        splits = p->workspace_cap / per_split;
    if (splits < 2)
        splits = 1;
    if (nrb * splits > 0x7fffffff)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "more than 2^31 - 1 blocks of query rows");
    out->splits = (int)splits;
    out->steps[0].kind = FT_STEP_KERNEL;
    out->steps[0].kernel = 0;
    out->steps[0].block = (unsigned)f->threads;
    out->steps[0].smem = (unsigned)f->smem_dynamic;
    out->steps[0].grid[0] = (unsigned)(nrb * splits);
    out->steps[0].grid[1] = (unsigned)units;
    out->steps[0].grid[2] = (unsigned)p->batch;
    out->nsteps = 1;
    if (splits == 1)
        return FT_OK;
    if ((rows + f->threads / 32 - 1) / (f->threads / 32) > 0x7fffffff)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "more than 2^31 - 1 blocks of rows to combine");
    out->steps[1].kind = FT_STEP_KERNEL;
    out->steps[1].kernel = 1;
    out->steps[1].block = (unsigned)f->threads;
    out->steps[1].grid[0] = (unsigned)((rows + f->threads / 32 - 1) / (f->threads / 32));
    out->steps[1].grid[1] = out->steps[1].grid[2] = 1;
    out->nsteps = 2;
    out->workspace_bytes = (size_t)(splits * per_split);
    return FT_OK;
}

int ft__fwd_pack(const ft_launch_facts *f, const ft_problem *p)
{
    const int g = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 1;

    if (!f->pack_gqa || !f->tma || f->split_kv || p->varlen || g < 2 || 64 % g != 0)
        return 1;
    return g;
}

/* One kernel step. Without TMA: a block per (row block, head, batch). With TMA: the row blocks
 * of every head (ft__fwd_pack: of every group of packed heads) and batch in one dimension
 * (units of two with pair_blocks), at most
 * max_resident blocks when the kernel is persistent; with block_counter and a workspace (4
 * bytes at least, or a size query), the counter zeroed in a step before it. Split keys:
 * fwd_plan_split. */
static ft_status fwd_plan(const ft_launch_facts *f, const ft_problem *p, ft_launch_plan *out, ft_err *err)
{
    ft_launch_step *s = &out->steps[0];
    long long gx, units, pack;

    memset(out, 0, sizeof *out);
    out->splits = 1;
    if (f->rows_per_block <= 0 || f->threads <= 0)
        return ft__fail(err, FT_ERR_INTERNAL, "a kernel without rows per block or threads");
    if (f->split_kv)
        return fwd_plan_split(f, p, out, err);
    gx = ((long long)p->seqlen_q + f->rows_per_block - 1) / f->rows_per_block;
    if (gx <= 0 || p->heads_q <= 0 || p->batch <= 0)
        return FT_OK; /* nothing to compute */
    if (p->batch > 65535 || p->heads_q > 65535)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "batch and heads must be at most 65535");
    s->kind = FT_STEP_KERNEL;
    s->kernel = 0;
    s->block = (unsigned)f->threads;
    s->smem = (unsigned)f->smem_dynamic;
    if (!f->tma) {
        s->grid[0] = (unsigned)gx, s->grid[1] = (unsigned)p->heads_q, s->grid[2] = (unsigned)p->batch;
        out->nsteps = 1;
        return FT_OK;
    }
    /* packed: blocks of rows_per_block / pack positions of a group's pack heads */
    pack = ft__fwd_pack(f, p);
    gx = ((long long)p->seqlen_q * pack + f->rows_per_block - 1) / f->rows_per_block;
    if (gx * (p->heads_q / pack) * p->batch > 0x7fffffff)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "more than 2^31 - 1 blocks of query rows");
    units = (f->pair_blocks ? (gx + 1) / 2 : gx) * (p->heads_q / pack) * p->batch;
    if (f->persistent && f->max_resident > 0 && units > f->max_resident)
        units = f->max_resident;
    s->grid[0] = (unsigned)units, s->grid[1] = 1, s->grid[2] = 1;
    out->nsteps = 1;
    if (f->block_counter && (p->workspace_cap < 0 || p->workspace_cap >= FT_BLOCK_COUNTER_BYTES)) {
        out->steps[1] = *s;
        memset(s, 0, sizeof *s);
        s->kind = FT_STEP_MEMSET;
        s->ws_offset = 0, s->ws_bytes = FT_BLOCK_COUNTER_BYTES;
        out->workspace_bytes = FT_BLOCK_COUNTER_BYTES;
        out->nsteps = 2;
    }
    return FT_OK;
}

int ft__fwd_needs(int kv_cache, const void *cu_seqlens_q, int total_q, const void *cu_seqlens_k, int total_k)
{
    if (kv_cache)
        return FT_NEEDS_SPLIT;
    if (cu_seqlens_q == NULL && cu_seqlens_k == NULL)
        return FT_NEEDS_DENSE;
    if ((cu_seqlens_q != NULL && total_q <= 0) || (cu_seqlens_k != NULL && total_k <= 0))
        return FT_NEEDS_SPLIT;
    return FT_NEEDS_PACKED;
}

int ft__facts_take(const ft_launch_facts *f, int needs)
{
    return needs == FT_NEEDS_DENSE || f->split_kv || (needs == FT_NEEDS_PACKED && f->packed);
}

const ft_op ft__op_fwd = {
    "fwd",
    "forward: O = softmax(scale·Q·Kᵀ)·V and the LSE per row",
    fwd_tensors,
    (int)(sizeof fwd_tensors / sizeof fwd_tensors[0]),
    fwd_key_fields,
    fwd_validate,
    fwd_key,
    fwd_distance,
    fwd_flops,
    fwd_bytes,
    fwd_tolerance,
    fwd_plan,
    fwd_legacy,
};
