#include "runtime/defaults.h"

#include <stdio.h>
#include <string.h>

#include "generator/family.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "ops/op.h"

/* The built-in choices per kernel family, head dim and causality (-1: either) when nothing
 * better is known. Forward: the variant that won most of the head dim's buckets in a full tune
 * of the family's spec on an H200 (2026-11-30; sm90 d=96 and 192 from the earlier tune, without
 * the balance knob); at d = 64 (since 2026-12-03, after the 192-row tile joined the space) the
 * variant with the best geometric mean over the six buckets of each causality of an exhaustive
 * bf16 tune on an H200 (bench/results/h200-2026-12-03-ranked): non-causal 192 x 128 without
 * overlap (0.99 of each bucket's best; the earlier 128 x 176 read 0.88-0.95), causal
 * 128 x 128 with three stages (0.96; 192 x 128 wins from 4k, the earlier 128 x 192 read
 * 0.85-0.96); at d = 128, 192 and 256 (since 2026-12-06) O leaves through shared memory (ostore=1;
 * at 192 and 256 through the only Q buffer): twins interleaved on an H100, one run each, read
 * 1.098 / 1.070 / 1.015 (the d = 128 non-causal default, 512 / 1k / 4k,
 * bench/results/h100-2026-12-05-knobs), 1.10 / 1.08 / 1.06 (d = 128 causal with ping-pong, 512 /
 * 1k / 2k), 1.115 / 1.083 / 1.027 and 1.109 / 1.079 / 1.041 (the d = 256 defaults, non-causal and
 * causal, 512 / 1k / 4k), 1.084 / 1.070 / 1.020 and 1.096 / 1.077 / 1.029 (the d = 192 defaults,
 * non-causal and causal, bench/results/h100-2026-12-06-bwdprof; all 48 of its bf16 128 x 96
 * two-stage ostore variants pass verify there), and a full
 * tune on it chose ostore=1 for 53 of the 56 buckets of those head dims (both dtypes)
 * (bench/results/h100-2026-12-06-lateq). Backward: at d = 64, 128 and 256 the variant that won most buckets of a
 * bf16 tune of the backward's spec on an H200 (2026-12-01, bench/results/h200-2026-12-01-train),
 * at 32, 96 and 192 the fastest of those timed by tests/bwd there; at 128 (non-causal), 192 and
 * 256 a second choice with one Q/dO stage for GPUs with less shared memory than an H200 (the
 * first needs 177 KB at d = 128, more than an A100's 163). gqa=loop in the sm80 family (the
 * tune's shapes had no grouped heads, where loop and atomic are the same kernel's work). On
 * compute capability 9.0 the sm_90a backward first at d = 64, 128 and 256 (deterministic calls
 * at d = 64 and 128 its det=1 variant of the causal default; at 256 the sm80 family's):
 * non-causal at d = 64 the dq_red variant that won every such bucket of a bf16 tune on an H200 (2026-12-01,
 * bench/results/h200-2026-12-01-bwd-sm90-d256), causal the earlier defaults (0.99–1.10 of cuDNN,
 * bench/results/h200-2026-12-01-bwd-sm90; the tune split their buckets between dq_red 0 and 1);
 * since 2026-12-03 (bench/results/h200-2026-12-03-bwd-bar, after the per-warpgroup dQ hand-off
 * and the LSE/D preload): d = 128 non-causal the causal default's twin (early_dv=1, staged dQ:
 * 1.03–1.07 of the dq_red one on each of the grid's six shapes) and d = 64 causal early_dv=2
 * (1.005–1.027 of early_dv=0 on each), three rounds interleaved with FA4 and cuDNN;
 * at d = 256 the kvsplit variant (the only structure of the spec that fits it); at d = 128 causal
 * with 8 or more query heads a K/V head its gqa=atomic twin (a CTA a query head's key block, dK
 * and dV summed by atomics, rather than one walking the group's heads, whose few long blocks
 * leave the last wave uneven; min_rows 8: a backward key's rows are its group): 1.27 / 1.13 /
 * 1.02 of the gqa=loop default at 1k / 4k / 16k with 8, one run of two rounds interleaved on an
 * H100 (bench/results/h100-2026-12-07-pack; at d = 64 and without the mask atomic read
 * 0.81-1.03, so those stay loop). At the other head
 * dims the sm_90a backward takes (2026-12-03, untuned; chosen by the structures the spec keeps
 * without spills): d = 32 d = 64's structure, 96 d = 128's, 160, 192 and 224 d = 256's (kvsplit;
 * with its det=1 variant at 160 and 192), 80, 112 and 144 the one consumer warpgroup of 64 keys
 * (bm=64,bn=64: the only structure whose dQ passes and registers fit those head dims; at 144
 * only non-causal, whose variants alone compile without spills); 176, 208 and 240 have no
 * sm_90a variant (their halves are no multiple of 16 and their whole rows too many registers)
 * and run the sm80 family's. The odd multiples of 8 (since 2026-12-05, not yet run on a GPU) take
 * the entries of the head dim above them in both families, in tiles that wide (72: 80's; 168
 * and 184: 192's kvsplit). The sm80 backward's entries at 48, 80, 112, 144, 160, 176, 208, 224
 * and 240 (2026-12-03, untuned): for each a shape the spec keeps there that compiles without
 * spills on sm_80 and sm_90 in both dtypes, causal or not, deterministic or not (d = 160 with a
 * one-stage second choice for GPUs with less shared memory); at 240 only causal variants do,
 * so a non-causal backward call of head dim 240 has no kernel. The first entry
 * of the call's operation whose family the context has and that builds wins: the sm_90a
 * family's where it runs (tests/test_defaults.c checks that every entry is kept by its spec and
 * compiles without spills on the targets it is for). Short-query forward calls (ops/op.h
 * FT_FWD_SHORT_QUERY) try the flash_decode_sm80 entries first: at d = 64, 128 and 256 the variant
 * that won most buckets of a bf16 tune of specs/flash_decode.lua on an H200 (2026-12-01), except at
 * d = 128, where bn=32,warps=4,stages=2 read the serving issue's first two shapes at 3.97 and 3.03
 * TB/s against 3.75 and 2.65 for the tune's bn=16,warps=4,stages=3 (two runs of the same benchmark
 * that day, bench/results/h200-2026-12-01-decode);
 * at 32, 96 and 192 untuned choices of the same kind (d = 192 with two stages: 109 KB, within an
 * A100's shared memory). Calls of more packed rows than one 16-row block (16 queries of a group of
 * 4, 4 of a group of 8, ...) take two row tiles a block at d = 64 and 128 (`mt=2`, the K/V read
 * half as often): the tune's winners of the 16-query bucket, 2.74 TB/s against 1.41 for the mt=1
 * default at d = 128 (bench/results/h200-2026-12-01-decode). */
static const ft_default_kernel defaults[] = {
    {"flash_decode_sm80", 64, -1, "bn=32,warps=2,stages=2,mt=2,pack=1", 32},
    {"flash_decode_sm80", 128, -1, "bn=16,warps=4,stages=2,mt=2,pack=1", 32},
    {"flash_decode_sm80", 32, -1, "bn=32,warps=4,stages=3,mt=1,pack=1", 0},
    {"flash_decode_sm80", 64, -1, "bn=32,warps=4,stages=3,mt=1,pack=1", 0},
    {"flash_decode_sm80", 96, -1, "bn=32,warps=4,stages=2,mt=1,pack=1", 0},
    {"flash_decode_sm80", 128, -1, "bn=32,warps=4,stages=2,mt=1,pack=1", 0},
    {"flash_decode_sm80", 192, -1, "bn=16,warps=4,stages=2,mt=1,pack=1", 0},
    {"flash_decode_sm80", 256, -1, "bn=16,warps=4,stages=2,mt=1,pack=1", 0},
    {"flash_fwd_sm90", 64, 0, "bm=192,bn=128,stages=2,pingpong=0,overlap=0,balance=0", 0},
    {"flash_fwd_sm90", 64, 1, "bm=128,bn=128,stages=3,pingpong=0,overlap=1,balance=1", 0},
    {"flash_fwd_sm90", 96, -1, "bm=128,bn=128,stages=2,pingpong=1,overlap=1,balance=0", 0},
    {"flash_fwd_sm90", 128, 0, "bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=0,ostore=1", 0},
    {"flash_fwd_sm90", 128, 1, "bm=128,bn=128,stages=2,pingpong=0,overlap=1,balance=1,ostore=1", 0},
    {"flash_fwd_sm90", 192, -1, "bm=128,bn=96,stages=2,pingpong=1,overlap=1,balance=0,ostore=1", 0},
    {"flash_fwd_sm90", 256, 0, "bm=128,bn=80,stages=2,pingpong=0,overlap=1,balance=0,ostore=1", 0},
    {"flash_fwd_sm90", 256, 1, "bm=128,bn=80,stages=2,pingpong=1,overlap=1,balance=1,ostore=1", 0},
    {"flash_fwd_sm80", 32, -1, "bm=128,bn=128,warps=4,stages=2,qreg=0,overlap=0", 0},
    {"flash_fwd_sm80", 64, -1, "bm=128,bn=128,warps=4,stages=1,qreg=0,overlap=0", 0},
    {"flash_fwd_sm80", 96, -1, "bm=128,bn=64,warps=4,stages=1,qreg=0,overlap=0", 0},
    {"flash_fwd_sm80", 128, -1, "bm=128,bn=64,warps=4,stages=1,qreg=0,overlap=0", 0},
    {"flash_fwd_sm80", 192, -1, "bm=64,bn=64,warps=4,stages=1,qreg=0,overlap=0", 0},
    {"flash_fwd_sm80", 256, -1, "bm=64,bn=64,warps=4,stages=1,qreg=0,overlap=0", 0},
    {"flash_bwd_sm90", 64, 0, "bm=128,bn=128,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 64, 1, "bm=128,bn=128,early_dv=2,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 64, -1, "bm=128,bn=128,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 128, 0, "bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 128, 1, "bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,gqa=atomic", 8},
    {"flash_bwd_sm90", 128, 1, "bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 128, -1, "bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 256, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 32, 0, "bm=128,bn=128,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 32, 1, "bm=128,bn=128,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 32, -1, "bm=128,bn=128,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 80, 0, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 80, 1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 80, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 96, 0, "bm=64,bn=128,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 96, 1, "bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 96, -1, "bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 112, 0, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 112, 1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0", 0},
    {"flash_bwd_sm90", 112, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 144, 0, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 144, 0, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 160, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 160, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=1,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 192, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0", 0},
    {"flash_bwd_sm90", 192, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=1,dq_red=0,det=1", 0},
    {"flash_bwd_sm90", 224, -1, "bm=64,bn=64,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0", 0},
    {"flash_bwd_sm80", 32, -1, "bm=32,bn=128,warps=4,split=1,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 64, -1, "bm=32,bn=128,warps=4,split=1,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 96, -1, "bm=64,bn=128,warps=8,split=1,stages=2,gqa=loop", 0},
    {"flash_bwd_sm80", 128, 0, "bm=64,bn=128,warps=8,split=2,stages=2,gqa=loop", 0},
    {"flash_bwd_sm80", 128, 1, "bm=64,bn=128,warps=8,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 128, 0, "bm=64,bn=128,warps=8,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 192, -1, "bm=64,bn=64,warps=8,split=2,stages=2,gqa=loop", 0},
    {"flash_bwd_sm80", 192, -1, "bm=64,bn=64,warps=8,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 48, -1, "bm=64,bn=128,warps=8,split=1,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 80, -1, "bm=64,bn=128,warps=8,split=1,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 112, -1, "bm=64,bn=128,warps=8,split=1,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 144, -1, "bm=64,bn=64,warps=8,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 160, -1, "bm=64,bn=64,warps=8,split=2,stages=2,gqa=loop", 0},
    {"flash_bwd_sm80", 160, -1, "bm=64,bn=64,warps=8,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 176, -1, "bm=64,bn=32,warps=4,split=2,stages=2,gqa=loop", 0},
    {"flash_bwd_sm80", 208, -1, "bm=64,bn=32,warps=4,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 224, -1, "bm=64,bn=64,warps=8,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 240, 1, "bm=32,bn=32,warps=4,split=2,stages=1,gqa=loop", 0},
    {"flash_bwd_sm80", 256, -1, "bm=64,bn=64,warps=8,split=2,stages=2,gqa=loop", 0},
    {"flash_bwd_sm80", 256, -1, "bm=64,bn=64,warps=8,split=2,stages=1,gqa=loop", 0},
};

const ft_default_kernel *ft__default_kernels(size_t *n)
{
    *n = sizeof defaults / sizeof defaults[0];
    return defaults;
}

/* Appends ",name=value" to out (length n) where base names no `name` and the text still fits. */
static size_t add_unnamed(const char *base, const char *name, const char *value, char *out, size_t cap, size_t n)
{
    char had[64];

    if (ft__variant_text_value(base, name, had, sizeof had) == 1)
        return n;
    return n + (size_t)snprintf(out + (n < cap ? n : cap - 1), n < cap ? cap - n : 1, ",%s=%s", name, value);
}

size_t ft__default_complete(const ft_spec *spec, const char *base, long long d, long long causal, long long det,
                            const char *dtype, char *out, size_t cap)
{
    static const char *const from_call[] = {"d", "causal", "det", "dtype"};
    char nums[3][24], value[32];
    const char *call[4];
    size_t n = (size_t)snprintf(out, cap, "%s", base);
    int i;

    snprintf(nums[0], sizeof nums[0], "%lld", d);
    snprintf(nums[1], sizeof nums[1], "%lld", causal);
    snprintf(nums[2], sizeof nums[2], "%lld", det);
    call[0] = nums[0], call[1] = nums[1], call[2] = nums[2], call[3] = dtype;
    for (i = 0; i < 4; i++)
        if (ft__spec_param_index(spec, from_call[i]) >= 0)
            n = add_unnamed(base, from_call[i], call[i], out, cap, n);
    for (i = 0; i < spec->nparams; i++) {
        const ft_param *p = &spec->params[i];
        if (p->dflt < 0)
            continue;
        if (p->kind == FT_PARAM_INT)
            snprintf(value, sizeof value, "%lld", p->ints[p->dflt]);
        n = add_unnamed(base, p->name, p->kind == FT_PARAM_INT ? value : p->strings[p->dflt], out, cap, n);
    }
    return n;
}

/* Whether the default entry e's kernels read what a call of needs gives them. */
static int entry_takes(const ft_family *fam, const ft_default_kernel *e, int needs)
{
    ft_launch_facts f;

    if (needs == FT_NEEDS_DENSE)
        return 1;
    memset(&f, 0, sizeof f);
    fam->launch(e->variant, &f);
    return ft__facts_take(&f, needs);
}

/* The head dim whose entries of family serve calls of head dim d: d where the table has it for
 * the family, else the nearest above it, else -1. */
static long long entry_dim(const char *family, long long d)
{
    long long best = -1;
    size_t i;

    for (i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (strcmp(defaults[i].family, family) == 0 && defaults[i].head_dim >= d &&
            (best < 0 || defaults[i].head_dim < best))
            best = defaults[i].head_dim;
    return best;
}

size_t ft__default_order(const ft_key *key, int needs, const ft_default_kernel **out, size_t cap)
{
    const int short_only = needs == FT_NEEDS_SPLIT;
    const long long sq = ft__key_get(key, "sq", -1);
    const int short_query = key->op == &ft__op_fwd && (short_only || (sq >= 1 && sq <= FT_FWD_SHORT_QUERY));
    const long long rows = ft__key_get(key, "sq", 1) * ft__key_get(key, "group", 1);
    const long long d = ft__key_get(key, "d", -1), causal = ft__key_get(key, "causal", -1);
    /* Passes over the table: 0 the short-query families' entries, 1 the others'. A packed
     * prefill batch falls back to the short-query family, which reads any batch. */
    int passes[2], npass = 0, k;
    size_t i, n = 0;

    if (short_query)
        passes[npass++] = 0;
    if (!short_only)
        passes[npass++] = 1;
    if (!short_query && needs == FT_NEEDS_PACKED)
        passes[npass++] = 0;
    for (k = 0; k < npass; k++)
        for (i = 0; i < sizeof defaults / sizeof defaults[0] && n < cap; i++) {
            const ft_default_kernel *e = &defaults[i];
            const ft_family *fam = ft__family_find(e->family);
            if (fam == NULL || fam->op != key->op || e->head_dim != entry_dim(e->family, d) ||
                (e->causal >= 0 && e->causal != causal) ||
                fam->short_query != (passes[k] == 0) || e->min_rows > rows || !entry_takes(fam, e, needs))
                continue;
            out[n++] = e;
        }
    return n;
}
