/* Tests of the operation layer (ops/): keys (text, parsing, nearest), the forward and backward
 * operations' keys, FLOPs and launch plans. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "runtime/defaults.h"
#include "ops/op.h"

static ft_problem problem(int b, int hq, int hkv, int sq, int sk, int d, int causal, int bf16)
{
    ft_problem p;
    memset(&p, 0, sizeof p);
    p.batch = b, p.heads_q = hq, p.heads_kv = hkv, p.seqlen_q = sq, p.seqlen_k = sk, p.head_dim = d;
    p.causal = causal, p.bf16 = bf16;
    return p;
}

static void test_fwd_key_text(void)
{
    ft_problem p = problem(4, 16, 4, 1000, 3000, 128, 1, 1);
    char text[FT_KEY_TEXT_MAX];
    ft_key k, back;
    ft_err err;

    ft__op_fwd.key(&p, &k);
    ft__key_format(&k, text, sizeof text);
    /* group: 16 / 4; sq: 1000 rounded up to 1024; seqlen: max(1000, 3000) rounded up to 4096;
     * bh: 4·16 = 64. */
    ASSERT_STREQ(text, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":1,\"group\":4,\"sq\":1024,\"seqlen\":4096,\"bh\":64}");
    ASSERT_OK(ft__key_parse(&ft__op_fwd, text, &back, &err), &err);
    ASSERT_TRUE(ft__key_equal(&k, &back));
    /* Any order and spacing parses to the same key. */
    ASSERT_OK(ft__key_parse(&ft__op_fwd,
                            " { \"bh\": 64, \"seqlen\":4096, \"sq\" : 1024, \"causal\":1, \"group\":4, \"d\":128, "
                            "\"dtype\":\"bf16\" } ",
                            &back, &err), &err);
    ASSERT_TRUE(ft__key_equal(&k, &back));
    /* Short sequences share the 64 bucket, the query length has buckets from 1; batch·heads of 3
     * rounds to 4. */
    p = problem(1, 3, 3, 5, 7, 64, 0, 0);
    ft__op_fwd.key(&p, &k);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"group\":1,\"sq\":8,\"seqlen\":64,\"bh\":4}");
}

/* A decode step of a grouped-query model (one query row against 8192 keys, 32 query heads on 4
 * K/V heads) and the prefill of the same length are keys apart; a group of 3 rounds to 4. */
static void test_fwd_key_decode_and_gqa(void)
{
    ft_problem p = problem(32, 32, 4, 1, 8192, 128, 0, 1);
    char text[FT_KEY_TEXT_MAX];
    ft_key decode, prefill;

    ft__op_fwd.key(&p, &decode);
    ft__key_format(&decode, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":0,\"group\":8,\"sq\":1,\"seqlen\":8192,\"bh\":1024}");
    p.seqlen_q = 8192;
    ft__op_fwd.key(&p, &prefill);
    ft__key_format(&prefill, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":0,\"group\":8,\"sq\":8192,\"seqlen\":8192,\"bh\":1024}");
    ASSERT_TRUE(!ft__key_equal(&decode, &prefill));
    p = problem(2, 12, 4, 5, 300, 64, 1, 0); /* 12 / 4 = 3 query heads per K/V head */
    ft__op_fwd.key(&p, &decode);
    ft__key_format(&decode, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":64,\"causal\":1,\"group\":4,\"sq\":8,\"seqlen\":512,\"bh\":32}");
    /* sq 16 is still short, 17 is not */
    p.seqlen_q = 16;
    ft__op_fwd.key(&p, &decode);
    ASSERT_EQ(ft__key_get(&decode, "sq", 0), FT_FWD_SHORT_QUERY);
    p.seqlen_q = 17;
    ft__op_fwd.key(&p, &prefill);
    ASSERT_EQ(ft__key_get(&prefill, "sq", 0), 32);
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &prefill) < 0);
}

/* A key text of the form before "group" and "sq" (packs and kernel sets of earlier versions)
 * reads as a prefill key of group 1 and sq = seqlen; with the shape it was stored with, those
 * two are the shape's. Any other missing field is still refused. */
static void test_fwd_key_legacy_text(void)
{
    static const char old[] = "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"seqlen\":4096,\"bh\":64}";
    char text[FT_KEY_TEXT_MAX];
    ft_key k;
    ft_err err;

    ASSERT_OK(ft__key_parse(&ft__op_fwd, old, &k, &err), &err);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"group\":1,\"sq\":4096,\"seqlen\":4096,\"bh\":64}");
    ASSERT_OK(ft__key_parse(&ft__op_fwd, " {\"bh\":64, \"seqlen\":4096,\"causal\":1,\"d\":128,\"dtype\":\"f16\"}", &k,
                            &err), &err);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"group\":1,\"sq\":4096,\"seqlen\":4096,\"bh\":64}");
    /* Stored with a shape: a decode of 16 query heads on 2 K/V heads (4·16 = 64, 4096 keys). */
    ASSERT_OK(ft__key_parse_shaped(&ft__op_fwd, old, 4, 16, 2, 1, 4096, &k, &err), &err);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"group\":8,\"sq\":1,\"seqlen\":4096,\"bh\":64}");
    /* Only the missing fields come from the shape: the text's own are kept, and a text of the
     * current form is read as it is. */
    ASSERT_OK(ft__key_parse_shaped(&ft__op_fwd, old, 1, 1, 1, 100, 100, &k, &err), &err);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"group\":1,\"sq\":128,\"seqlen\":4096,\"bh\":64}");
    ASSERT_OK(ft__key_parse_shaped(&ft__op_fwd,
                                   "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"group\":2,\"sq\":4,\"seqlen\":4096,\"bh\":64}",
                                   4, 16, 2, 1, 4096, &k, &err), &err);
    ASSERT_EQ(ft__key_get(&k, "group", 0), 2);
    ASSERT_EQ(ft__key_get(&k, "sq", 0), 4);
    /* One of the two new fields without the other is no form the key ever had. */
    ASSERT_EQ(ft__key_parse(&ft__op_fwd, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"group\":1,\"seqlen\":4096,\"bh\":64}",
                            &k, &err), FT_ERR_CORRUPT);
    ASSERT_EQ(ft__key_parse(&ft__op_fwd, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"sq\":1,\"seqlen\":4096,\"bh\":64}",
                            &k, &err), FT_ERR_CORRUPT);
    ASSERT_EQ(ft__key_parse_shaped(&ft__op_fwd, "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"seqlen\":4096}", 4, 16, 2, 1,
                                   4096, &k, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "is not a key of operation fwd");
}

/* The forward's distance: decode and prefill keys never stand in for each other; otherwise the
 * query length weighs as the sequence length, the group as batch·heads. */
static void test_fwd_distance(void)
{
    ft_problem p = problem(8, 32, 8, 1, 4096, 128, 0, 0);
    ft_key decode, decode4, decode32k, prefill, gqa1, gqa16;

    ft__op_fwd.key(&p, &decode);
    p.seqlen_q = 4; /* sq 4: a factor of 4 away */
    ft__op_fwd.key(&p, &decode4);
    p.seqlen_q = 1, p.seqlen_k = 32768;
    ft__op_fwd.key(&p, &decode32k);
    p.seqlen_q = p.seqlen_k = 4096;
    ft__op_fwd.key(&p, &prefill);
    p.seqlen_q = 1, p.seqlen_k = 4096, p.heads_kv = 32; /* group 1 */
    ft__op_fwd.key(&p, &gqa1);
    p.heads_kv = 2; /* group 16 */
    ft__op_fwd.key(&p, &gqa16);
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &prefill) < 0);
    ASSERT_TRUE(ft__op_fwd.distance(&prefill, &decode) < 0);
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &decode) == (64.0 - 12) * (0.5 / 64 / 64));
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &decode4) == 2.0 + (64.0 - 12) * (0.5 / 64 / 64));
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &decode32k) == 3.0 + (64.0 - 15) * (0.5 / 64 / 64));
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &gqa1) == 0.5 * 2 + (64.0 - 12) * (0.5 / 64 / 64));
    ASSERT_TRUE(ft__op_fwd.distance(&decode, &gqa16) == 0.5 * 2 + (64.0 - 12) * (0.5 / 64 / 64));
    /* Nearest: the decode key's own group before another group, which is before another query
     * length; no prefill key for a decode call, whatever else matches. */
    {
        ft_key c[4];
        c[0] = prefill, c[1] = decode4, c[2] = gqa16, c[3] = decode;
        ASSERT_EQ(ft__key_nearest(&decode, c, 4), 3);
        ASSERT_EQ(ft__key_nearest(&decode, c, 3), 2);
        ASSERT_EQ(ft__key_nearest(&decode, c, 2), 1);
        ASSERT_EQ(ft__key_nearest(&decode, c, 1), -1);
        ASSERT_EQ(ft__key_nearest(&prefill, c + 1, 3), -1);
    }
}

static void test_key_parse_refuses(void)
{
    static const char *const bad[] = {
        "",
        "{}",
        "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"seqlen\":4096}",                  /* bh missing */
        "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"seqlen\":4096,\"bh\":64,\"x\":1}", /* unknown */
        "{\"dtype\":\"f16\",\"d\":128,\"d\":64,\"causal\":1,\"seqlen\":4096,\"bh\":64}", /* twice */
        "{\"dtype\":\"f16\",\"dtype\":\"bf16\",\"d\":128,\"causal\":1,\"seqlen\":4096,\"bh\":64}",
        "{\"dtype\":\"f16\",\"d\":128.5,\"causal\":1,\"seqlen\":4096,\"bh\":64}",       /* not an integer */
        "{\"dtype\":\"f16\",\"d\":\"128\",\"causal\":1,\"seqlen\":4096,\"bh\":64}",
        "{\"dtype\":\"f1\\\"6\",\"d\":128,\"causal\":1,\"seqlen\":4096,\"bh\":64}",      /* escapes */
        "{\"dtype\":\"f16\",\"d\":128,\"causal\":1,\"seqlen\":4096,\"bh\":64} trailing",
        "{\"dtype\":\"f16\",\"d\":99999999999999999999,\"causal\":1,\"seqlen\":4096,\"bh\":64}",
    };
    ft_key k;
    ft_err err;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ft__key_parse(&ft__op_fwd, bad[i], &k, &err) != FT_ERR_CORRUPT)
            FT_FAIL_("accepted key text %s", bad[i]);
        ASSERT_CONTAINS(err.msg, "is not a key of operation fwd");
    }
}

/* The forward's nearest key, written out apart from ops/fwd.c: same dtype, d and causality, both
 * short-query keys or neither; distance |log2 seqlen ratio| + |log2 sq ratio| + 0.5·|log2 bh
 * ratio| + 0.5·|log2 group ratio|; a tie to the longer sequence, then to the earlier candidate. */
static int reference_nearest(const ft_key *want, const ft_key *c, int n)
{
    double best = INFINITY;
    int pick = -1, i;
    for (i = 0; i < n; i++) {
        double d;
        if (strcmp(c[i].dtype, want->dtype) != 0 || ft__key_get(&c[i], "d", 0) != ft__key_get(want, "d", 0) ||
            ft__key_get(&c[i], "causal", 0) != ft__key_get(want, "causal", 0) ||
            (ft__key_get(&c[i], "sq", 0) <= 16) != (ft__key_get(want, "sq", 0) <= 16))
            continue;
        d = fabs(log2((double)ft__key_get(&c[i], "seqlen", 0) / ft__key_get(want, "seqlen", 0))) +
            fabs(log2((double)ft__key_get(&c[i], "sq", 0) / ft__key_get(want, "sq", 0))) +
            0.5 * fabs(log2((double)ft__key_get(&c[i], "bh", 0) / ft__key_get(want, "bh", 0))) +
            0.5 * fabs(log2((double)ft__key_get(&c[i], "group", 0) / ft__key_get(want, "group", 0)));
        if (d < best - 1e-9 ||
            (fabs(d - best) <= 1e-9 && ft__key_get(&c[i], "seqlen", 0) > ft__key_get(&c[pick], "seqlen", 0))) {
            best = d;
            pick = i;
        }
    }
    return pick;
}

static void test_nearest_matches_the_reference(void)
{
    ft_key cands[24], want;
    unsigned seed = 12345;
    int trial, i, none = 0;

    for (trial = 0; trial < 4000; trial++) {
        int n = 1 + trial % 24;
        for (i = 0; i < n + 1; i++) {
            ft_key *k = i < n ? &cands[i] : &want;
            int hq;
            ft_problem p;
            seed = seed * 1103515245u + 12345u;
            hq = 1 << (seed >> 12) % 6;
            p = problem(1 << (seed >> 8) % 4, hq, hq >> (seed >> 4) % 4 > 0 ? hq >> (seed >> 4) % 4 : 1,
                        (seed >> 15) % 2 ? 1 << (seed >> 16) % 6 : 64 << (seed >> 16) % 9, 64 << (seed >> 20) % 9,
                        (seed >> 24) % 2 ? 64 : 128, (seed >> 26) % 2, (seed >> 28) % 4 == 0);
            ft__op_fwd.key(&p, k);
        }
        none += reference_nearest(&want, cands, n) < 0;
        if (ft__key_nearest(&want, cands, n) != reference_nearest(&want, cands, n))
            FT_FAIL_("trial %d: nearest %d, the reference %d", trial, ft__key_nearest(&want, cands, n),
                     reference_nearest(&want, cands, n));
    }
    ASSERT_TRUE(none > 0 && none < 4000); /* both outcomes were tried */
}

static void test_fwd_flops_and_bytes(void)
{
    ft_problem p = problem(2, 8, 2, 1024, 2048, 128, 0, 0);
    ASSERT_TRUE(ft__op_fwd.flops(&p) == 4.0 * 2 * 8 * 1024 * 2048 * 128);
    p.causal = 1;
    ASSERT_TRUE(ft__op_fwd.flops(&p) == 2.0 * 2 * 8 * 1024 * 2048 * 128);
    /* Q and O 2·1024·8·128 elements, K and V 2·2048·2·128, 2 bytes each, LSE 4 bytes a row. */
    ASSERT_TRUE(ft__op_fwd.bytes(&p) == 2.0 * (2 * 2097152.0 + 2 * 1048576.0) + 4.0 * 2 * 8 * 1024);
}

static void test_fwd_plan_grids(void)
{
    ft_launch_facts f;
    ft_launch_plan plan;
    ft_problem p = problem(3, 5, 5, 1000, 1000, 64, 0, 0);
    ft_err err;

    memset(&f, 0, sizeof f);
    f.threads = 128, f.smem_dynamic = 49152, f.rows_per_block = 128;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.nsteps, 1);
    ASSERT_EQ(plan.workspace_bytes, 0);
    ASSERT_EQ(plan.steps[0].kind, FT_STEP_KERNEL);
    ASSERT_EQ(plan.steps[0].grid[0], 8); /* ceil(1000 / 128) */
    ASSERT_EQ(plan.steps[0].grid[1], 5);
    ASSERT_EQ(plan.steps[0].grid[2], 3);
    ASSERT_EQ(plan.steps[0].block, 128);
    ASSERT_EQ(plan.steps[0].smem, 49152);
    /* TMA, one block per unit: all row blocks in x. */
    f.tma = 1, f.tma_rows_kv = 128, f.max_resident = 132;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 8 * 5 * 3);
    ASSERT_EQ(plan.steps[0].grid[1], 1);
    /* Persistent: at most the resident blocks; paired: half the row blocks (rounded up). */
    f.persistent = 1;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 120);
    f.pair_blocks = 1, f.max_resident = 1000;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 4 * 5 * 3);
    /* A block counter: with a workspace (or a size query) its int is zeroed in a step before the
     * kernel, which keeps its grid; without one (or with less than the int) the kernel alone. */
    f.pair_blocks = 0, f.block_counter = 1, f.max_resident = 100;
    p.workspace_cap = -1;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.nsteps, 2);
    ASSERT_EQ(plan.workspace_bytes, FT_BLOCK_COUNTER_BYTES);
    ASSERT_EQ(plan.steps[0].kind, FT_STEP_MEMSET);
    ASSERT_EQ(plan.steps[0].ws_offset, 0);
    ASSERT_EQ(plan.steps[0].ws_bytes, FT_BLOCK_COUNTER_BYTES);
    ASSERT_EQ(plan.steps[1].kind, FT_STEP_KERNEL);
    ASSERT_EQ(plan.steps[1].kernel, 0);
    ASSERT_EQ(plan.steps[1].grid[0], 100);
    ASSERT_EQ(plan.steps[1].block, 128);
    ASSERT_EQ(plan.steps[1].smem, 49152);
    p.workspace_cap = 256;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.nsteps, 2);
    p.workspace_cap = FT_BLOCK_COUNTER_BYTES - 1;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.nsteps, 1);
    ASSERT_EQ(plan.workspace_bytes, 0);
    ASSERT_EQ(plan.steps[0].kind, FT_STEP_KERNEL);
    ASSERT_EQ(plan.steps[0].grid[0], 100);
    p.workspace_cap = 0;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.nsteps, 1);
    ASSERT_EQ(plan.workspace_bytes, 0);
    /* Too many heads for a grid dimension. */
    p.heads_q = p.heads_kv = 70000;
    ASSERT_EQ(ft__op_fwd.plan(&f, &p, &plan, &err), FT_ERR_UNSUPPORTED);
}

/* A TMA kernel that packs a group's query heads into its rows (pack_gqa): where the group
 * divides 64 and the batch is dense, blocks of rows_per_block / G positions of G heads, numbered
 * per K/V head; otherwise the unpacked grid. */
static void test_fwd_plan_packed(void)
{
    ft_launch_facts f;
    ft_launch_plan plan;
    ft_problem p = problem(3, 16, 2, 1000, 1000, 64, 1, 0);
    ft_err err;

    memset(&f, 0, sizeof f);
    f.threads = 384, f.smem_dynamic = 99000, f.rows_per_block = 128;
    f.tma = 1, f.tma_rows_kv = 128, f.pack_gqa = 1;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 8);
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 63 * 2 * 3); /* ceil(1000 / 16) blocks of each K/V head */
    f.pair_blocks = 1;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 32 * 2 * 3);
    f.pair_blocks = 0;
    /* A variable-length batch, a group that does not divide 64, no groups: unpacked. */
    p.varlen = 1;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 1);
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 8 * 16 * 3);
    p.varlen = 0, p.heads_q = 6;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 1);
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 8 * 6 * 3);
    p.heads_q = p.heads_kv = 2;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 1);
    /* The largest group packed is 64, whose block of 128 rows holds two positions. */
    p.heads_q = 128, p.heads_kv = 2;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 64);
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0], 500 * 2 * 3);
    p.heads_q = 256;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 1);
    /* Not packed: a kernel without the fact, and the split-key kernels (whose own plan packs). */
    p.heads_q = 16;
    f.pack_gqa = 0;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 1);
    f.pack_gqa = 1, f.split_kv = 1;
    ASSERT_EQ(ft__fwd_pack(&f, &p), 1);
}

/* The split-key plan: splits from the GPU's size (fwd_splits' rule), a combine step and the
 * workspace of the partial results when there is more than one, cut to what the call gives. */
static void test_fwd_plan_split(void)
{
    ft_launch_facts f;
    ft_launch_plan plan;
    ft_problem p = problem(4, 8, 1, 1, 131072, 128, 0, 0);
    ft_err err;

    memset(&f, 0, sizeof f);
    f.threads = 128, f.smem_dynamic = 143616, f.rows_per_block = 16, f.keys_per_block = 128;
    f.split_kv = 1, f.pack_gqa = 1, f.max_resident = 132;
    p.workspace_cap = -1;
    /* 4 blocks of 8 packed rows, 1024 rounds of tiles: 32 runs of 32 rounds fill 128 of 132 SMs
     * (33 runs would take as many rounds). */
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 32);
    ASSERT_EQ(plan.nsteps, 2);
    ASSERT_EQ(plan.steps[0].kernel, 0);
    ASSERT_EQ(plan.steps[0].grid[0], 32);
    ASSERT_EQ(plan.steps[0].grid[1], 1);
    ASSERT_EQ(plan.steps[0].grid[2], 4);
    ASSERT_EQ(plan.steps[0].smem, 143616);
    ASSERT_EQ(plan.steps[1].kernel, 1); /* the combine: a warp per row, 32 rows */
    ASSERT_EQ(plan.steps[1].grid[0], 8);
    ASSERT_EQ(plan.steps[1].block, 128);
    ASSERT_EQ(plan.workspace_bytes, 32 * 32 * 129 * 4);
    /* A workspace for 5 splits' partial results: 5; none: unsplit, one step. */
    p.workspace_cap = 5 * 32 * 129 * 4 + 100;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 5);
    ASSERT_EQ(plan.steps[0].grid[0], 5);
    ASSERT_EQ(plan.workspace_bytes, 5 * 32 * 129 * 4);
    p.workspace_cap = 0;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 1);
    ASSERT_EQ(plan.nsteps, 1);
    ASSERT_EQ(plan.workspace_bytes, 0);
    /* Unpacked: a block per query head, 32 blocks; 4 runs make 128. */
    p.workspace_cap = -1, f.pack_gqa = 0;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 4);
    ASSERT_EQ(plan.steps[0].grid[0], 4);
    ASSERT_EQ(plan.steps[0].grid[1], 8);
    /* Blocks that fill the GPU alone are not split; nor without the device's size. */
    f.pack_gqa = 1;
    p = problem(128, 16, 2, 2, 2048, 128, 1, 0);
    p.workspace_cap = -1;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 1);
    ASSERT_EQ(plan.steps[0].grid[0], 1);
    ASSERT_EQ(plan.steps[0].grid[1], 2);
    ASSERT_EQ(plan.steps[0].grid[2], 128);
    p = problem(4, 8, 1, 1, 131072, 128, 0, 0);
    p.workspace_cap = -1, f.max_resident = 0;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 1);
    /* 79 rounds of tiles over 4 blocks on 264 places: 27 runs of 3 rounds (the fewest runs that
     * get there; 26 take 4). */
    p = problem(2, 16, 2, 1, 5000, 256, 0, 0);
    p.workspace_cap = -1, f.keys_per_block = 64, f.max_resident = 264;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.splits, 27);
    ASSERT_EQ(plan.steps[0].grid[0], 27);
    /* 40 packed rows (5 queries of a group of 8): three blocks of 16. */
    p = problem(1, 8, 1, 5, 4096, 128, 1, 0);
    f.max_resident = 132;
    ASSERT_OK(ft__op_fwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[0].grid[0] % 3, 0);
    ASSERT_EQ(plan.steps[0].grid[0] / 3, (unsigned)plan.splits);
}

/* The built-in defaults a call tries, in order: a decode call the short-query family's first
 * (mt=2 where its packed rows fill more than one 16-row block), then the prefill families'; a
 * prefill call never the short-query family's; the backward only its own. */
static void test_default_order(void)
{
    const ft_default_kernel *order[FT_DEFAULTS_MAX];
    ft_key k;
    size_t n, i;
    int seen_prefill = 0;

    ft__key_of(&ft__op_fwd, "bf16", 128, 0, 0, 32, 32, 4, 1, 8192, &k); /* 8 packed rows */
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 3);
    ASSERT_STREQ(order[0]->family, "flash_decode_sm80");
    ASSERT_CONTAINS(order[0]->variant, "mt=1");
    for (i = 0; i < n; i++) {
        ASSERT_EQ(order[i]->head_dim, 128);
        if (strcmp(order[i]->family, "flash_decode_sm80") != 0)
            seen_prefill = 1;
        else
            ASSERT_TRUE(!seen_prefill); /* the decode family's entries come first */
    }
    ASSERT_TRUE(seen_prefill);
    ft__key_of(&ft__op_fwd, "bf16", 128, 1, 0, 16, 32, 8, 16, 8192, &k); /* 16 queries x 4: 64 rows */
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 2);
    ASSERT_STREQ(order[0]->family, "flash_decode_sm80");
    ASSERT_CONTAINS(order[0]->variant, "mt=2");
    ASSERT_CONTAINS(order[1]->variant, "mt=1");
    ft__key_of(&ft__op_fwd, "bf16", 128, 0, 0, 4, 32, 4, 4096, 4096, &k); /* prefill */
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 1);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(strcmp(order[i]->family, "flash_decode_sm80") != 0);
    ASSERT_STREQ(order[0]->family, "flash_fwd_sm90");
    /* A call with a KV cache: the short-query family's entries only, prefill-length or not. */
    n = ft__default_order(&k, FT_NEEDS_SPLIT, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 1);
    for (i = 0; i < n; i++)
        ASSERT_STREQ(order[i]->family, "flash_decode_sm80");
    ASSERT_CONTAINS(order[0]->variant, "mt=2"); /* 4096 rows */
    /* A variable-length prefill batch with its totals: the prefill families (the sm_90a
     * forward first), then the split-key family, which reads any batch. */
    n = ft__default_order(&k, FT_NEEDS_PACKED, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 3);
    ASSERT_STREQ(order[0]->family, "flash_fwd_sm90");
    ASSERT_STREQ(order[1]->family, "flash_fwd_sm80");
    ASSERT_STREQ(order[n - 1]->family, "flash_decode_sm80");
    ft__key_of(&ft__op_fwd, "bf16", 128, 0, 0, 32, 32, 4, 1, 8192, &k);
    n = ft__default_order(&k, FT_NEEDS_SPLIT, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 1);
    for (i = 0; i < n; i++)
        ASSERT_STREQ(order[i]->family, "flash_decode_sm80");
    ft__key_of(&ft__op_bwd, "bf16", 128, 0, 0, 4, 32, 4, 1, 4096, &k); /* the backward: its families */
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 1);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(strncmp(order[i]->family, "flash_bwd_", 10) == 0);
    /* The backward at d = 128 causal: the gqa=atomic twin first where a K/V head has 8 query
     * heads or more (its min_rows: a backward key's rows are its group), never with fewer. */
    ft__key_of(&ft__op_bwd, "bf16", 128, 1, 0, 4, 32, 4, 4096, 4096, &k);
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 2);
    ASSERT_STREQ(order[0]->family, "flash_bwd_sm90");
    ASSERT_CONTAINS(order[0]->variant, "gqa=atomic");
    ASSERT_TRUE(strstr(order[1]->variant, "gqa=atomic") == NULL);
    ft__key_of(&ft__op_bwd, "bf16", 128, 1, 0, 4, 32, 8, 4096, 4096, &k); /* 4 a K/V head */
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 1);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(strstr(order[i]->variant, "gqa=atomic") == NULL);
    ft__key_of(&ft__op_bwd, "bf16", 128, 0, 0, 4, 32, 4, 4096, 4096, &k); /* not causal */
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    for (i = 0; i < n; i++)
        ASSERT_TRUE(strstr(order[i]->variant, "gqa=atomic") == NULL);
    /* A head dim the table lacks: each family's entries of the nearest one above it (the
     * spec's open d takes the call's); none above 256. */
    ft__key_of(&ft__op_fwd, "bf16", 80, 0, 0, 4, 32, 4, 4096, 4096, &k);
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 2);
    ASSERT_STREQ(order[0]->family, "flash_fwd_sm90");
    for (i = 0; i < n; i++)
        ASSERT_EQ(order[i]->head_dim, 96);
    ft__key_of(&ft__op_fwd, "bf16", 224, 1, 0, 4, 32, 4, 4096, 4096, &k);
    n = ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX);
    ASSERT_TRUE(n >= 2);
    for (i = 0; i < n; i++)
        ASSERT_EQ(order[i]->head_dim, 256);
    ft__key_of(&ft__op_fwd, "bf16", 272, 0, 0, 4, 32, 4, 1, 4096, &k); /* no kernel for d = 272 */
    ASSERT_EQ(ft__default_order(&k, FT_NEEDS_DENSE, order, FT_DEFAULTS_MAX), 0);
    ASSERT_EQ(ft__default_order(&k, FT_NEEDS_DENSE, order, 0), 0);
}

/* Which kernels take which calls: dense calls any, a packed batch with its totals those that
 * read packed batches (and the split-key ones), a KV cache or a packed batch without totals the
 * split-key ones only. */
static void test_facts_take(void)
{
    static const int cu[2] = {0, 9};
    ft_launch_facts plain, packed, split;

    memset(&plain, 0, sizeof plain);
    packed = plain, split = plain;
    packed.packed = 1;
    split.split_kv = split.packed = 1;
    ASSERT_EQ(ft__fwd_needs(0, NULL, 0, NULL, 0), FT_NEEDS_DENSE);
    ASSERT_EQ(ft__fwd_needs(0, cu, 9, cu, 9), FT_NEEDS_PACKED);
    ASSERT_EQ(ft__fwd_needs(0, cu, 9, NULL, 0), FT_NEEDS_PACKED);
    ASSERT_EQ(ft__fwd_needs(0, cu, 0, NULL, 0), FT_NEEDS_SPLIT);
    ASSERT_EQ(ft__fwd_needs(0, NULL, 0, cu, 0), FT_NEEDS_SPLIT);
    ASSERT_EQ(ft__fwd_needs(1, NULL, 0, NULL, 0), FT_NEEDS_SPLIT);
    ASSERT_TRUE(ft__facts_take(&plain, FT_NEEDS_DENSE) && !ft__facts_take(&plain, FT_NEEDS_PACKED) &&
                !ft__facts_take(&plain, FT_NEEDS_SPLIT));
    ASSERT_TRUE(ft__facts_take(&packed, FT_NEEDS_DENSE) && ft__facts_take(&packed, FT_NEEDS_PACKED) &&
                !ft__facts_take(&packed, FT_NEEDS_SPLIT));
    ASSERT_TRUE(ft__facts_take(&split, FT_NEEDS_DENSE) && ft__facts_take(&split, FT_NEEDS_PACKED) &&
                ft__facts_take(&split, FT_NEEDS_SPLIT));
}

static void test_bwd_key(void)
{
    ft_problem p = problem(4, 16, 4, 1000, 3000, 128, 1, 1);
    char text[FT_KEY_TEXT_MAX];
    ft_key k, back, other;
    ft_err err;

    p.deterministic = 1;
    ft__op_bwd.key(&p, &k);
    ft__key_format(&k, text, sizeof text);
    /* group: 16 / 4 query heads per K/V head. */
    ASSERT_STREQ(text, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":1,\"det\":1,\"group\":4,\"seqlen\":4096,\"bh\":64}");
    ASSERT_OK(ft__key_parse(&ft__op_bwd, text, &back, &err), &err);
    ASSERT_TRUE(ft__key_equal(&k, &back));
    /* A forward key is not a backward one, and the other way round. */
    ASSERT_EQ(ft__key_parse(&ft__op_fwd, text, &back, &err), FT_ERR_CORRUPT);
    ASSERT_EQ(ft__key_parse(&ft__op_bwd, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":1,\"seqlen\":4096,\"bh\":64}", &back,
                            &err),
              FT_ERR_CORRUPT);
    /* Nearest: never across determinism, head dim or causality; a group of 3 rounds to 4. */
    p.deterministic = 0;
    ft__op_bwd.key(&p, &other);
    ASSERT_TRUE(ft__op_bwd.distance(&k, &other) < 0);
    p.deterministic = 1, p.seqlen_q = p.seqlen_k = 500;
    ft__op_bwd.key(&p, &other);
    ASSERT_TRUE(ft__op_bwd.distance(&k, &other) == 3.0 + (64.0 - 9) * (0.5 / 64 / 64));
    p = problem(1, 6, 2, 64, 64, 64, 0, 0);
    ft__op_bwd.key(&p, &other);
    ASSERT_EQ(ft__key_get(&other, "group", 0), 4);
    ASSERT_TRUE(ft__op_find("bwd") == &ft__op_bwd);
}

static void test_bwd_flops_and_bytes(void)
{
    ft_problem p = problem(2, 8, 2, 1024, 2048, 128, 0, 0);

    /* 2.5 times the forward's 4·b·hq·sq·sk·d. */
    ASSERT_TRUE(ft__op_bwd.flops(&p) == 2.5 * ft__op_fwd.flops(&p));
    p.causal = 1;
    ASSERT_TRUE(ft__op_bwd.flops(&p) == 2.5 * ft__op_fwd.flops(&p));
    /* Q, O, dO read and dQ written (2·1024·8·128 each), K, V read and dK, dV written
     * (2·2048·2·128 each), 2 bytes; the LSE 4 bytes a row. */
    ASSERT_TRUE(ft__op_bwd.bytes(&p) == 2.0 * (4 * 2097152.0 + 4 * 1048576.0) + 4.0 * 2 * 8 * 1024);
    ASSERT_TRUE(ft__op_bwd.tolerance(0).ctol > 0 && ft__op_fwd.tolerance(0).ctol == 0);
}

/* The workspace as templates/flash_bwd_sm80.cuh lays it out, written here from its header. */
static long long bwd_workspace(int b, int hq, int hkv, int sq, int sk, int d, int bm, int bn, int atomic, int det)
{
    const long long mbq = (sq + bm - 1) / bm, nbk = (sk + bn - 1) / bn;
    const int kvacc = atomic && hq > hkv;
    long long bytes = 4LL * b * hq * mbq * bm * (d + 2) + kvacc * 8LL * b * hkv * nbk * bn * d +
                      det * 4LL * b * hq * mbq + det * kvacc * 4LL * b * hkv * nbk;
    return (bytes + 255) / 256 * 256;
}

static void test_bwd_plan(void)
{
    ft_launch_facts f;
    ft_launch_plan plan;
    ft_problem p = problem(3, 8, 2, 1000, 700, 128, 0, 0);
    ft_err err;

    memset(&f, 0, sizeof f);
    f.threads = 256, f.smem_dynamic = 107520, f.rows_per_block = 64, f.keys_per_block = 128, f.head_dim = 128;
    /* gqa=loop: pre over query blocks, main one block per key block and K/V head, post over
     * query blocks; kernels numbered as the family's entries (1 pre, 0 main, 2 post). */
    ASSERT_OK(ft__op_bwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.nsteps, 3);
    ASSERT_EQ(plan.steps[0].kernel, 1);
    ASSERT_EQ(plan.steps[1].kernel, 0);
    ASSERT_EQ(plan.steps[2].kernel, 2);
    ASSERT_EQ(plan.steps[0].grid[0], 16); /* ceil(1000 / 64) */
    ASSERT_EQ(plan.steps[0].grid[1], 8);
    ASSERT_EQ(plan.steps[0].grid[2], 3);
    ASSERT_EQ(plan.steps[0].smem, 0);
    ASSERT_EQ(plan.steps[1].grid[0], 6); /* ceil(700 / 128) */
    ASSERT_EQ(plan.steps[1].grid[1], 2);
    ASSERT_EQ(plan.steps[1].smem, 107520);
    ASSERT_EQ(plan.steps[2].grid[0], 16);
    ASSERT_EQ(plan.steps[0].block, 256);
    ASSERT_EQ(plan.steps[2].block, 256);
    ASSERT_EQ(plan.workspace_bytes, bwd_workspace(3, 8, 2, 1000, 700, 128, 64, 128, 0, 0));
    /* gqa=atomic with a group: one main block per query head, dK/dV summed in the workspace,
     * post over max(query blocks, key blocks); with det the counters too. */
    f.gqa_atomic = 1, f.deterministic = 1;
    p.seqlen_k = 3000;
    ASSERT_OK(ft__op_bwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[1].grid[0], 24);
    ASSERT_EQ(plan.steps[1].grid[1], 8);
    ASSERT_EQ(plan.steps[2].grid[0], 24);
    ASSERT_EQ(plan.workspace_bytes, bwd_workspace(3, 8, 2, 1000, 3000, 128, 64, 128, 1, 1));
    /* Without a group there is nothing to sum: the loop's workspace, plus the dQ counters. */
    p.heads_kv = 8;
    ASSERT_OK(ft__op_bwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.steps[2].grid[0], 16);
    ASSERT_EQ(plan.workspace_bytes, bwd_workspace(3, 8, 8, 1000, 3000, 128, 64, 128, 1, 1));
    ASSERT_TRUE(plan.workspace_bytes % 256 == 0);
    /* A kernel whose tiles are wider than the head dim (flash_bwd_sm90 at d = 72: 80): its dQ
     * tiles in the workspace are that wide. */
    f.tile_dim = 80, f.head_dim = 72, p.head_dim = 72;
    ASSERT_OK(ft__op_bwd.plan(&f, &p, &plan, &err), &err);
    ASSERT_EQ(plan.workspace_bytes, bwd_workspace(3, 8, 8, 1000, 3000, 80, 64, 128, 1, 1));
    f.tile_dim = 0, f.head_dim = 128, p.head_dim = 128;
    /* A kernel of another head dim, and grids too large, are refused. */
    p.head_dim = 64;
    ASSERT_EQ(ft__op_bwd.plan(&f, &p, &plan, &err), FT_ERR_INTERNAL);
    p.head_dim = 128, p.heads_q = p.heads_kv = 70000;
    ASSERT_EQ(ft__op_bwd.plan(&f, &p, &plan, &err), FT_ERR_UNSUPPORTED);
}

static void test_registry(void)
{
    ASSERT_TRUE(ft__op_find("fwd") == &ft__op_fwd);
    ASSERT_TRUE(ft__op_find("nope") == NULL);
    ASSERT_TRUE(ft__op_find(NULL) == NULL);
}

FT_TEST_MAIN(FT_CASE(test_fwd_key_text), FT_CASE(test_fwd_key_decode_and_gqa), FT_CASE(test_fwd_key_legacy_text),
             FT_CASE(test_fwd_distance), FT_CASE(test_key_parse_refuses), FT_CASE(test_nearest_matches_the_reference),
             FT_CASE(test_fwd_flops_and_bytes), FT_CASE(test_fwd_plan_grids), FT_CASE(test_fwd_plan_packed), FT_CASE(test_fwd_plan_split), FT_CASE(test_default_order), FT_CASE(test_facts_take), FT_CASE(test_bwd_key),
             FT_CASE(test_bwd_flops_and_bytes), FT_CASE(test_bwd_plan), FT_CASE(test_registry))
