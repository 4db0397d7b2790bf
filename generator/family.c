#include "family.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/variant.h"

static const char *const dtype_values[] = {"f16", "bf16", NULL};
static const char *const fwd_strings[] = {"dtype", NULL};
static const char *const *const fwd_string_values[] = {dtype_values};

static const char *const fwd_sm80_ints[] = {"d", "bm", "bn", "warps", "stages", "causal", "qreg",
                                            "overlap", NULL};
static const char *const fwd_sm90_ints[] = {"d",       "bm",      "bn",    "stages",       "causal", "pingpong",
                                            "overlap", "balance", "psmem", "pexp",         "skip_rescale",
                                            "ostore",  "early_rescale", "ctas", "pack", NULL};

static int fwd_sm80_threads(const ft_spec *spec, const ft_variant *v)
{
    return (int)ft__variant_int(spec, v, "warps", 4) * 32;
}

/* One producer warpgroup plus one consumer warpgroup per 64 query rows. */
static int fwd_sm90_threads(const ft_spec *spec, const ft_variant *v)
{
    return 128 * ((int)ft__variant_int(spec, v, "bm", 64) / 64 + 1);
}

/* A wgmma wrapper for one shape: m64n{n}k16 with fp32 accumulators d[n/2], A from shared
 * memory (descriptor da, scale_d 0 overwrites d) or, with reg_a, from four registers (always
 * accumulating), B from shared memory (descriptor db); trans_a, trans_b: the operand is MN-major
 * (imm-trans 1; A only from shared memory). The accumulator list depends on n, so it is written
 * out here rather than in the template. (The forward's wrappers' text is what it was before the
 * trans flags existed: its sources, and so its tuned results, are unchanged.) */
static void emit_wgmma(ft_strbuf *sb, const char *name, int n, const char *type, int reg_a, int trans_a, int trans_b)
{
    const int nd = n / 2;
    int i;

    ft__sb_printf(sb, "// wgmma m64n%dk16, A from %s, B from shared memory\n", n,
                  reg_a ? "registers" : "shared memory");
    if (reg_a)
        ft__sb_printf(sb, "__device__ __forceinline__ void %s(float (&d)[%d], unsigned a0, unsigned a1, "
                          "unsigned a2, unsigned a3, unsigned long long db)\n{\n", name, nd);
    else
        ft__sb_printf(sb, "__device__ __forceinline__ void %s(float (&d)[%d], unsigned long long da, "
                          "unsigned long long db, int scale_d)\n{\n", name, nd);
    ft__sb_printf(sb, "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n",
                  reg_a ? nd + 5 : nd + 2);
    ft__sb_printf(sb, "                 \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {\"", n, type, type);
    for (i = 0; i < nd; i++)
        ft__sb_printf(sb, "%s\"%%%d%s\"", i % 8 == 0 ? "\n                 " : " ", i, i + 1 < nd ? "," : "");
    if (reg_a)
        ft__sb_printf(sb, "\n                 \"}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d;\\n}\\n\"\n",
                      nd, nd + 1, nd + 2, nd + 3, nd + 4, trans_b);
    else
        ft__sb_printf(sb, "\n                 \"}, %%%d, %%%d, p, 1, 1, %d, %d;\\n}\\n\"\n", nd, nd + 1, trans_a,
                      trans_b);
    ft__sb_printf(sb, "                 :");
    for (i = 0; i < nd; i++)
        ft__sb_printf(sb, "%s\"+f\"(d[%d])%s", i % 8 == 0 ? "\n                   " : " ", i,
                      i + 1 < nd ? "," : "");
    if (reg_a)
        ft__sb_printf(sb, "\n                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"l\"(db), \"r\"(1));\n}\n\n");
    else
        ft__sb_printf(sb, "\n                 : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n}\n\n");
}

/* flash_fwd_sm90 reads S = Q·Kᵀ (n = bn) and O += P·V (n = d) through generated wrappers; with
 * psmem P·V takes P from shared memory (ft_wgmma_op, A K-major) instead of registers. */
static void fwd_sm90_prelude(ft_strbuf *sb, const ft_spec *spec, const ft_variant *v)
{
    const char *dtype = ft__variant_str(spec, v, "dtype");
    const char *type = dtype != NULL && strcmp(dtype, "bf16") == 0 ? "bf16" : "f16";
    /* P·V over the tiles' whole width: the head dim rounded up to 16 (the template's DK) */
    const int dk = ((int)ft__variant_int(spec, v, "d", 64) + 15) / 16 * 16;

    emit_wgmma(sb, "ft_wgmma_s", (int)ft__variant_int(spec, v, "bn", 64), type, 0, 0, 0);
    if (ft__variant_int(spec, v, "psmem", 0) != 0)
        emit_wgmma(sb, "ft_wgmma_op", dk, type, 0, 0, 1);
    else
        emit_wgmma(sb, "ft_wgmma_o", dk, type, 1, 0, 1);
}

/* The swizzle span (elements per swizzled row of a column block: 64, 32 or 16) of the forward's
 * Q, K and V tiles: the widest that divides the head dim rounded up to a multiple of 16, the
 * tiles' width in shared memory (templates/flash_fwd_sm90.cuh CH and DK; at d = 72 the tiles are
 * 80 wide in blocks of 16, at 120 128 wide in blocks of 64, the boxes past d filled with zeros). */
static int fwd_sm90_span(int d)
{
    const int dk = (d + 15) / 16 * 16;
    return dk % 64 == 0 ? 64 : dk % 32 == 0 ? 32 : 16;
}

/* The width of flash_bwd_sm90's tiles (its template's D): the head dim rounded up to whole k16
 * steps, and with kvsplit to two halves of whole k16 steps, a multiple of 32 (d = 72: 80; 168
 * and 176 with kvsplit: 192; 240: 256). TMA fills the columns past the head dim with zeros. */
static int bwd_sm90_tile_width(int d, int kvsplit)
{
    if (kvsplit)
        return (d + 31) / 32 * 32;
    return (d + 15) / 16 * 16;
}

/* How flash_bwd_sm90 cuts a variant's columns (its template's DC, DKV, PW and CH), with W the
 * tiles' width (bwd_sm90_tile_width of the head dim d): each consumer warpgroup computes dC = W
 * (bm = 128: the warpgroups split dQ's rows) or W / warpgroups columns of dQ's partial, in the
 * fewest passes of equal width, a multiple of 16 and at most 112 (the pass's accumulators,
 * width/2 per thread, live beside dK and dV), or, with bm not a multiple of 64 (its dQ
 * transposed, the columns as wgmma's m), passes of 64; and dK and dV for W (or, with kvsplit, W/2)
 * columns. The Q, dO, K and V tiles are column blocks of the widest span of 64, 32 or 16
 * elements that all of these are multiples of, as the pass and warpgroup offsets must start on a
 * block. *width and *span are 0 when no pass width exists (the spec's constraints keep no such
 * variant). */
static void bwd_sm90_cut(int d, int bm, int bn, int kvsplit, int *width, int *span)
{
    const int nwg = kvsplit ? 2 : bn / 64;
    const int dt = bwd_sm90_tile_width(d, kvsplit);
    const int dc = bm == 128 || nwg < 1 ? dt : dt / nwg, dkv = kvsplit ? dt / 2 : dt;
    int passes, s;

    *width = *span = 0;
    if (bm % 64 != 0) /* dQ transposed: passes of 64 columns, wgmma's m */
        *width = dc % 64 == 0 ? 64 : 0;
    else
        for (passes = 1; passes <= dc / 16; passes++)
            if (dc % passes == 0 && (dc / passes) % 16 == 0 && dc / passes <= 112) {
                *width = dc / passes;
                break;
            }
    for (s = 64; s >= 16 && *width > 0; s /= 2)
        if (dt % s == 0 && dkv % s == 0 && *width % s == 0) {
            *span = s;
            break;
        }
}

/* flash_bwd_sm90's products: Sᵀ and dPᵀ (n = bm, both operands K-major), dV and dK (n = d, the
 * tiles' width, A from registers, B MN-major), dQ by passes of the cut's width (both MN-major;
 * with bm not a multiple of 64 dQᵀ, n = bm, A MN-major and B K-major).
 * With kvsplit two warpgroups share the keys: Sᵀ and dPᵀ take half of the queries each (n =
 * bm/2), dV and dK half of the columns (n = d/2) with A, K-major, from shared memory
 * (ft_wgmma_kvs). Both dK/dV wrappers are emitted at the variant's width, as the template's code
 * names both (one of them unused). Before them the tiles' width and the cut (FTP_TILE_D,
 * FTP_SPAN, FTP_DQ_WIDTH), which the runtime's tensor maps and workspace share through the
 * launch facts. */
static void bwd_sm90_prelude(ft_strbuf *sb, const ft_spec *spec, const ft_variant *v)
{
    const char *dtype = ft__variant_str(spec, v, "dtype");
    const char *type = dtype != NULL && strcmp(dtype, "bf16") == 0 ? "bf16" : "f16";
    const int split = ft__variant_int(spec, v, "kvsplit", 0) != 0;
    const int bm = (int)ft__variant_int(spec, v, "bm", 64);
    const int d = bwd_sm90_tile_width((int)ft__variant_int(spec, v, "d", 64), split);
    int width, span;

    bwd_sm90_cut(d, bm, (int)ft__variant_int(spec, v, "bn", 64), split, &width, &span);
    ft__sb_printf(sb, "#define FTP_TILE_D %d\n#define FTP_SPAN %d\n#define FTP_DQ_WIDTH %d\n\n", d, span, width);
    emit_wgmma(sb, "ft_wgmma_st", split ? bm / 2 : bm, type, 0, 0, 0);
    emit_wgmma(sb, "ft_wgmma_kv", split ? d / 2 : d, type, 1, 0, 1);
    emit_wgmma(sb, "ft_wgmma_kvs", split ? d / 2 : d, type, 0, 0, 1);
    if (bm % 64 != 0)
        emit_wgmma(sb, "ft_wgmma_dq", bm, type, 0, 1, 0);
    else
        emit_wgmma(sb, "ft_wgmma_dq", width > 0 ? width : 64, type, 0, 1, 1);
}

/* Each of the named parameters gives the n of a generated wgmma wrapper, one accumulator operand
 * per two columns: its values must be widths wgmma has (multiples of 8 up to 256), or the wrapper
 * would be wrong code, or, for n = 10^9, a source of gigabytes. */
static ft_status check_widths(const ft_family *fam, const ft_spec *spec, const char *const *names, ft_err *err)
{
    int k;

    for (; *names != NULL; names++) {
        const ft_param *p = &spec->params[ft__spec_param_index(spec, *names)];
        for (k = 0; k < p->nvalues; k++)
            if (p->ints[k] < 8 || p->ints[k] > 256 || p->ints[k] % 8 != 0)
                return ft__fail(err, FT_ERR_SPEC,
                                "%s: template %s takes %s = %lld, not a width wgmma has (a "
                                "multiple of 8 from 8 to 256)",
                                spec->path, fam->name, *names, p->ints[k]);
    }
    return FT_OK;
}

/* flash_fwd_sm90: S = Q·Kᵀ (n = bn) and O += P·V (n = d). */
static ft_status fwd_sm90_check_values(const ft_family *fam, const ft_spec *spec, ft_err *err)
{
    static const char *const names[] = {"bn", "d", NULL};
    return check_widths(fam, spec, names, err);
}

/* An integer parameter of a variant string, or def. */
static int text_int(const char *variant, const char *name, int def)
{
    char v[32], *end = NULL;
    long x;

    if (variant == NULL || ft__variant_text_value(variant, name, v, sizeof v) != 1)
        return def;
    errno = 0;
    x = strtol(v, &end, 10);
    return errno == 0 && *end == '\0' && x >= 0 && x <= 1 << 20 ? (int)x : def;
}

/* One block per bm query rows of one head and batch. */
static void fwd_sm80_launch(const char *variant, ft_launch_facts *out)
{
    out->rows_per_block = text_int(variant, "bm", 64);
    out->head_dim = text_int(variant, "d", 0);
    out->packed = 1;
}

/* Tensor maps of Q (bm rows) and K, V (bn rows), with ostore O (FT_TMA_O_ROWS); a persistent grid when not causal, or causal
 * with balance 1 (units of two row blocks) or 2 (blocks from a counter in the workspace); else
 * one block per row block. pack: a block's rows are a group's query heads times positions where
 * ops/fwd.c's ft__fwd_pack says the call allows it. */
static void fwd_sm90_launch(const char *variant, ft_launch_facts *out)
{
    const int causal = text_int(variant, "causal", 0), balance = text_int(variant, "balance", 0);

    out->rows_per_block = text_int(variant, "bm", 64);
    out->head_dim = text_int(variant, "d", 0);
    out->tma = 1;
    out->tma_rows_kv = text_int(variant, "bn", 64);
    out->tma_span = fwd_sm90_span(out->head_dim);
    out->pair_blocks = causal && balance == 1;
    out->block_counter = causal && balance == 2;
    out->persistent = !causal || balance != 0;
    out->packed = 1;
    out->tma_o = text_int(variant, "ostore", 0);
    out->pack_gqa = text_int(variant, "pack", 0);
}

static const char *const gqa_values[] = {"loop", "atomic", NULL};
static const char *const bwd_strings[] = {"dtype", "gqa", NULL};
static const char *const *const bwd_string_values[] = {dtype_values, gqa_values};
static const char *const bwd_sm80_ints[] = {"d", "bm", "bn", "warps", "split", "stages", "causal", "det", NULL};
/* ops/bwd.c's launch plan: 0 the main kernel, 1 pre, 2 post. */
static const char *const bwd_entries[] = {"", "_pre", "_post", NULL};

/* pre, main and post: one block size, 32 threads per warp. */
static int bwd_sm80_threads(const ft_spec *spec, const ft_variant *v)
{
    return (int)ft__variant_int(spec, v, "warps", 4) * 32;
}

/* Whether a backward variant's grid takes query heads, summing dK and dV of a group by atomics
 * (gqa=atomic), rather than K/V heads (gqa=loop, the default where a spec lists no gqa). */
static int bwd_gqa_atomic(const char *variant)
{
    char gqa[16];

    return variant != NULL && ft__variant_text_value(variant, "gqa", gqa, sizeof gqa) == 1 &&
           strcmp(gqa, "atomic") == 0;
}

/* The main kernel: bn keys of one K/V head (gqa=loop) or one query head (gqa=atomic) per
 * block, walking query blocks of bm rows; pre and post one block per query block. Its tiles,
 * and the workspace's accumulators, are the head dim rounded up to 16 wide. */
static void bwd_sm80_launch(const char *variant, ft_launch_facts *out)
{
    out->rows_per_block = text_int(variant, "bm", 64);
    out->keys_per_block = text_int(variant, "bn", 64);
    out->head_dim = text_int(variant, "d", 0);
    out->tile_dim = (out->head_dim + 15) / 16 * 16;
    out->deterministic = text_int(variant, "det", 0);
    out->gqa_atomic = bwd_gqa_atomic(variant);
}

static const char *const bwd_sm90_ints[] = {"d",      "bm",  "bn",      "causal",  "early_dv", "lpt", "kvsplit",
                                            "dq_red", "det", "s_ahead", "dq_late", "qrot", NULL};

/* One consumer warpgroup per 64 keys of the CTA's block (or two sharing them, kvsplit), and the
 * producer warpgroup. */
static int bwd_sm90_threads(const ft_spec *spec, const ft_variant *v)
{
    if (ft__variant_int(spec, v, "kvsplit", 0) != 0)
        return 128 * 3;
    return 128 * ((int)ft__variant_int(spec, v, "bn", 64) / 64 + 1);
}

/* bn keys of one K/V head per block of the main kernel (walking the group's query heads; gqa=atomic:
 * of one query head), query blocks of bm rows; pre and post one block per query block. The main
 * kernel takes tensor maps of Q and dO (bm rows) and K and V (bn rows). */
static void bwd_sm90_launch(const char *variant, ft_launch_facts *out)
{
    int width;

    out->rows_per_block = text_int(variant, "bm", 64);
    out->keys_per_block = text_int(variant, "bn", 64);
    out->head_dim = text_int(variant, "d", 0);
    out->tma = 1;
    out->tma_rows_kv = out->keys_per_block;
    out->tile_dim = bwd_sm90_tile_width(out->head_dim, text_int(variant, "kvsplit", 0) != 0);
    bwd_sm90_cut(out->head_dim, out->rows_per_block, out->keys_per_block, text_int(variant, "kvsplit", 0),
                 &width, &out->tma_span);
    out->deterministic = text_int(variant, "det", 0);
    out->gqa_atomic = bwd_gqa_atomic(variant);
}

/* flash_bwd_sm90: Sᵀ and dPᵀ (n = bm, or bm/2), dV and dK (n = d, or d/2); bn sizes the grid's
 * warpgroups (the template's static_asserts take d a multiple of 8 from 32 to 256, bm 64, 128 or
 * a multiple of 16 that 64 does not divide, bn 64 or 128). */
static ft_status bwd_sm90_check_values(const ft_family *fam, const ft_spec *spec, ft_err *err)
{
    static const char *const names[] = {"bm", "d", "bn", NULL};
    return check_widths(fam, spec, names, err);
}

static const char *const decode_sm80_ints[] = {"d", "bn", "warps", "stages", "mt", "pack", "causal", NULL};
/* ops/fwd.c's plan for split keys: 0 the main kernel, 1 the combine. */
static const char *const decode_entries[] = {"", "_combine", NULL};

/* One block size for both kernels: 32 threads per warp. */
static int decode_sm80_threads(const ft_spec *spec, const ft_variant *v)
{
    return (int)ft__variant_int(spec, v, "warps", 4) * 32;
}

/* Blocks of 16·mt rows (pack: of the K/V head's group of query heads), warps·bn keys per round
 * of a block's warps; the keys split across blocks as the plan decides. */
static void decode_sm80_launch(const char *variant, ft_launch_facts *out)
{
    out->rows_per_block = 16 * text_int(variant, "mt", 1);
    out->keys_per_block = text_int(variant, "bn", 64) * text_int(variant, "warps", 4);
    out->head_dim = text_int(variant, "d", 0);
    out->split_kv = 1;
    out->pack_gqa = text_int(variant, "pack", 0);
    out->packed = 1;
}

static const ft_family families[] = {
    {"flash_fwd_sm80", &ft__op_fwd, "flash_fwd_sm80.cuh",
     "FlashAttention-2 forward: mma.sync m16n8k16, ldmatrix, cp.async K/V ring", 80, 0,
     fwd_sm80_ints, fwd_strings, fwd_string_values, "", 0, fwd_sm80_threads, NULL, NULL, fwd_sm80_launch, NULL, 0},
    {"flash_fwd_sm90", &ft__op_fwd, "flash_fwd_sm90.cuh",
     "Hopper forward: TMA K/V ring on mbarriers, wgmma, producer and consumer warpgroups", 90, 90,
     fwd_sm90_ints, fwd_strings, fwd_string_values, "a", 1, fwd_sm90_threads, fwd_sm90_prelude,
     fwd_sm90_check_values, fwd_sm90_launch, NULL, 0},
    {"flash_bwd_sm80", &ft__op_bwd, "flash_bwd_sm80.cuh",
     "FlashAttention-2 backward (dQ, dK, dV): mma.sync m16n8k16, ldmatrix, cp.async; pre, main and post kernels",
     80, 0, bwd_sm80_ints, bwd_strings, bwd_string_values, "", 0, bwd_sm80_threads, NULL, NULL, bwd_sm80_launch,
     bwd_entries, 0},
    {"flash_bwd_sm90", &ft__op_bwd, "flash_bwd_sm90.cuh",
     "Hopper backward (dQ, dK, dV): wgmma for all five products, a producer warpgroup (TMA Q/dO stages on "
     "mbarriers, dQ by bulk reduction); pre, main and post kernels",
     90, 90, bwd_sm90_ints, bwd_strings, bwd_string_values, "a", 1, bwd_sm90_threads, bwd_sm90_prelude,
     bwd_sm90_check_values, bwd_sm90_launch, bwd_entries, 0},
    {"flash_decode_sm80", &ft__op_fwd, "flash_decode_sm80.cuh",
     "forward for short queries (decode): keys split across blocks with a combine kernel, grouped query "
     "heads packed as rows; mma.sync m16n8k16, a cp.async K/V ring per warp",
     80, 0, decode_sm80_ints, fwd_strings, fwd_string_values, "", 0, decode_sm80_threads, NULL, NULL,
     decode_sm80_launch, decode_entries, 1},
};

const ft_embedded_file *ft__template_file(const char *name)
{
    const ft_embedded_file *f;

    for (f = ft__embedded_templates; f->name != NULL; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

const ft_family *ft__family_find(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

const ft_family *ft__spec_family(const ft_spec *spec, ft_err *err)
{
    const ft_family *fam = ft__family_find(spec->template_name);
    char known[256];

    if (fam == NULL) {
        ft__family_names(known, sizeof known);
        ft__fail(err, FT_ERR_SPEC, "%s: unknown template '%s' (known: %s)", spec->path, spec->template_name, known);
    }
    return fam;
}

ft_status ft__spec_check_op(const ft_spec *spec, const ft_op *op, const char *what, ft_err *err)
{
    const ft_family *fam = ft__spec_family(spec, err);

    if (fam == NULL)
        return FT_ERR_SPEC;
    if (fam->op != op)
        return ft__fail(err, FT_ERR_UNSUPPORTED,
                        "%s: its kernels (%s) compute the %s operation, and %s %s kernels only so far "
                        "(flashtune plan and gen compile it)",
                        spec->path, fam->name, fam->op->name, what, op->name);
    return FT_OK;
}

void ft__family_names(char *out, size_t cap)
{
    size_t i, n = 0;

    if (cap > 0)
        out[0] = '\0';
    for (i = 0; i < sizeof families / sizeof families[0] && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i > 0 ? ", " : "", families[i].name);
}

/* The length of the longest entry name of the spec's variants: "ft_<family>", per parameter
 * "_<name><value>" (generator/emit.c), and the longest suffix of the family's kernels. */
static size_t longest_entry(const ft_family *fam, const ft_spec *spec)
{
    size_t suffix = 0, len;
    int i;

    for (i = 0; fam->entries != NULL && fam->entries[i] != NULL; i++)
        if (strlen(fam->entries[i]) > suffix)
            suffix = strlen(fam->entries[i]);
    len = strlen("ft_") + strlen(fam->name) + suffix;

    for (i = 0; i < spec->nparams; i++)
        len += 1 + strlen(spec->params[i].name) + ft__param_longest_value(&spec->params[i]);
    return len;
}

ft_status ft__family_check_spec(const ft_family *fam, const ft_spec *spec, ft_err *err)
{
    ft_status rc;
    int i;

    for (i = 0; fam->int_params[i] != NULL; i++) {
        int pi = ft__spec_param_index(spec, fam->int_params[i]);
        if (pi < 0)
            return ft__fail(err, FT_ERR_SPEC, "%s: template %s needs parameter '%s'", spec->path,
                            fam->name, fam->int_params[i]);
        if (spec->params[pi].kind != FT_PARAM_INT)
            return ft__fail(err, FT_ERR_SPEC, "%s: parameter '%s' of template %s takes integers",
                            spec->path, fam->int_params[i], fam->name);
    }
    for (i = 0; fam->string_params[i] != NULL; i++) {
        int pi = ft__spec_param_index(spec, fam->string_params[i]);
        const ft_param *p;
        int k;

        if (pi < 0)
            return ft__fail(err, FT_ERR_SPEC, "%s: template %s needs parameter '%s'", spec->path,
                            fam->name, fam->string_params[i]);
        p = &spec->params[pi];
        if (p->kind != FT_PARAM_STRING)
            return ft__fail(err, FT_ERR_SPEC, "%s: parameter '%s' of template %s takes names",
                            spec->path, p->name, fam->name);
        for (k = 0; k < p->nvalues; k++) {
            const char *const *allowed = fam->string_values[i];
            int ok = 0;
            int a;
            for (a = 0; allowed[a] != NULL; a++)
                ok |= strcmp(allowed[a], p->strings[k]) == 0;
            if (!ok) {
                char known[128];
                size_t n = 0;
                known[0] = '\0';
                for (a = 0; allowed[a] != NULL && n < sizeof known; a++)
                    n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", a > 0 ? ", " : "", allowed[a]);
                return ft__fail(err, FT_ERR_SPEC, "%s: template %s has no %s '%s' (it supports %s)", spec->path,
                                fam->name, p->name, p->strings[k], known);
            }
        }
    }
    rc = fam->check_values != NULL ? fam->check_values(fam, spec, err) : FT_OK;
    if (rc != FT_OK)
        return rc;
    if (longest_entry(fam, spec) >= FT_ENTRY_MAX)
        return ft__fail(err, FT_ERR_SPEC,
                        "%s: the kernels' entry names (ft_%s, _<name><value> per parameter, a kernel's suffix) "
                        "can be %zu characters long; at most %d fit (use shorter names or values)",
                        spec->path, fam->name, longest_entry(fam, spec), FT_ENTRY_MAX - 1);
    return FT_OK;
}

void ft__family_launch(const ft_family *fam, const char *variant, int threads, long long smem_dynamic,
                       ft_launch_facts *out)
{
    memset(out, 0, sizeof *out);
    fam->launch(variant, out);
    out->threads = threads;
    out->smem_dynamic = smem_dynamic;
}

int ft__family_nentries(const ft_family *fam)
{
    int n = 0;

    if (fam->entries == NULL)
        return 1;
    while (fam->entries[n] != NULL)
        n++;
    return n;
}

int ft__family_entry_name(const ft_family *fam, const char *entry, int i, char *out, size_t cap)
{
    const char *suffix = fam->entries != NULL && i >= 0 && i < ft__family_nentries(fam) ? fam->entries[i] : NULL;
    int n;

    if (cap > 0)
        out[0] = '\0';
    if (suffix == NULL && !(fam->entries == NULL && i == 0))
        return 0;
    n = snprintf(out, cap, "%s%s", entry, suffix != NULL ? suffix : "");
    return n >= 0 && (size_t)n < cap;
}

int ft__family_threads(const ft_family *fam, const ft_spec *spec, const ft_variant *v)
{
    return fam->threads(spec, v);
}

void ft__family_target(const ft_family *fam, const ft_arch *arch, char *out, size_t cap)
{
    size_t n = strlen(arch->name), k = strlen(fam->target_suffix);

    if (k > 0 && n >= k && strcmp(arch->name + n - k, fam->target_suffix) == 0)
        k = 0; /* already the suffixed target */
    snprintf(out, cap, "%s%s", arch->name, k > 0 ? fam->target_suffix : "");
}

int ft__family_supports_arch(const ft_family *fam, const ft_arch *arch, char *reason, size_t cap)
{
    /* An exact capability first: "9.0 or newer" would be wrong for sm_90a code on sm_89. */
    if (fam->exact_cc != 0 && arch->cc != fam->exact_cc) {
        snprintf(reason, cap, "%s runs only on compute capability %d.%d", fam->name,
                 fam->exact_cc / 10, fam->exact_cc % 10);
        return 0;
    }
    if (arch->cc < fam->min_cc) {
        snprintf(reason, cap, "%s needs compute capability %d.%d or newer", fam->name,
                 fam->min_cc / 10, fam->min_cc % 10);
        return 0;
    }
    return 1;
}
