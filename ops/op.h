/*
 * Operations: what a call computes, apart from how kernels for it are generated.
 *
 *   operation  what a call computes: the forward pass (O and the LSE from Q, K, V), the
 *              backward pass (dQ, dK, dV from those and dO). It owns its tensors, the checks of a call, its key,
 *              the distance between keys, FLOPs and bytes, the bounds its outputs are verified
 *              against, and its launch plan.
 *   family     one way of generating kernels for an operation (generator/family.h): a CUDA
 *              template and what it needs of a spec and a target.
 *   variant    one point of a family's spec (generator/variant.h).
 *   key        the operation's description of a call for choosing a winner (a "bucket"): the
 *              fields that decide which kernel is fastest. Stored as canonical text, so an
 *              operation can add fields without a change of the database schema.
 *   launch plan the ordered steps (memset, kernel) that one call runs, with their grids and
 *              the workspace they need; computed from the kernel's launch facts and the call's
 *              sizes, so the launch path allocates nothing.
 *
 * This layer knows no CUDA and no database; generator/, tuning_db/, runtime/ and tuner/ build
 * on it. Adding an operation means adding its own file here (ops/fwd.c is the forward, ops/bwd.c
 * the backward) and listing it in ops/op.c.
 */
#ifndef FT_OPS_OP_H
#define FT_OPS_OP_H

#include <stddef.h>

#include "common/error.h"
#include "ops/problem.h"

/* ---- keys ------------------------------------------------------------------------------ */

#define FT_KEY_MAX_FIELDS 8
#define FT_KEY_TEXT_MAX 160

typedef struct ft_op ft_op;

/* One field of a key: a name ("d", "causal", "seqlen") and an integer value; the dtype is its own
 * field of every key. */
typedef struct ft_key_field {
    char name[16];
    long long value;
} ft_key_field;

typedef struct ft_key {
    const ft_op *op;
    char dtype[8];                          /* "f16", "bf16" */
    int nfields;                            /* in the operation's order */
    ft_key_field fields[FT_KEY_MAX_FIELDS];
} ft_key;

/* The canonical text of a key, as the database and packs store it: a JSON object with the
 * dtype first, then the operation's fields in its order, no spaces:
 * {"dtype":"f16","d":128,"causal":1,"group":1,"sq":4096,"seqlen":4096,"bh":64}. Equal keys have
 * equal texts. */
void ft__key_format(const ft_key *k, char *out, size_t cap);

/* Parses a key text of operation op: exactly the operation's fields, in any order, each once,
 * integers only (and the dtype a string); or a text of an older form of the operation's key,
 * which lacks some fields that the operation's `legacy` completes. FT_ERR_CORRUPT naming the
 * text otherwise. */
ft_status ft__key_parse(const ft_op *op, const char *text, ft_key *out, ft_err *err);

/* As ft__key_parse, but the fields an older form of the key lacks are those of the key of a call
 * of this shape (and the text's dtype, head dim, causality and determinism), not the
 * operation's defaults: for keys stored with the shape they were measured on (results, misses,
 * the winners of packs). A text of the current form is read as it is. */
ft_status ft__key_parse_shaped(const ft_op *op, const char *text, int batch, int heads_q, int heads_kv, int seqlen_q,
                               int seqlen_k, ft_key *out, ft_err *err);

/* The bucket fields of a key for people ("group <= 8, sq <= 1, seqlen <= 8192, b*h <= 1024": those
 * of group, sq, seqlen and bh that the key has, in its order) into out (cap bytes, cut to fit). */
void ft__key_describe(const ft_key *k, char *out, size_t cap);

/* A field's value, or def when the key has no such field. */
long long ft__key_get(const ft_key *k, const char *name, long long def);

int ft__key_equal(const ft_key *a, const ft_key *b);

/* An order of keys: by operation name, dtype, then the fields in the operation's order (for the
 * forward: head dim, causality, group, query length, sequence length, batch·heads). */
int ft__key_cmp(const ft_key *a, const ft_key *b);

/* The key of a call of `op` with these sizes, causality and determinism (the backward's choice;
 * the forward ignores it): what the checks of packs compute a key from. */
void ft__key_of(const ft_op *op, const char *dtype, int head_dim, int causal, int deterministic, int batch,
                int heads_q, int heads_kv, int seqlen_q, int seqlen_k, ft_key *out);

/* The smallest power of two >= n and >= floor: the buckets of the attention operations' keys. */
long long ft__pow2_at_least(long long n, long long floor);

/* The candidate nearest to want by the operation's distance, or -1 when none is comparable
 * (another dtype, head dim or causality, for the attention operations). */
int ft__key_nearest(const ft_key *want, const ft_key *cands, int n);

/* ---- tensors ------------------------------------------------------------------------------ */

typedef enum ft_tensor_role {
    FT_TENSOR_INPUT,
    FT_TENSOR_OUTPUT,
    FT_TENSOR_OPTIONAL_OUTPUT, /* may be NULL */
    FT_TENSOR_WORKSPACE
} ft_tensor_role;

typedef struct ft_op_tensor {
    const char *name;    /* "q" */
    ft_tensor_role role;
    const char *dtype;   /* "the call's" (16-bit) or "fp32" */
    const char *shape;   /* "[batch, seqlen_q, heads_q, head_dim]" */
} ft_op_tensor;

/* ---- launch plans ------------------------------------------------------------------------- */

/* How one kernel of a family is launched, as the family derives it from a variant
 * (ft__family_launch_facts) and the loader completes it: what a plan needs of a kernel. */
typedef struct ft_launch_facts {
    int threads;            /* per block */
    long long smem_dynamic; /* bytes per block */
    int rows_per_block;     /* query rows per block */
    int head_dim;           /* the head dim the kernel computes (its tensor maps' boxes) */
    int tma;                /* takes tensor maps of Q, K and V (boxes of rows_per_block and
                               tma_rows_kv rows), walks the row blocks from blockIdx.x in steps of
                               gridDim.x */
    int tma_rows_kv;
    int tma_span;           /* elements per swizzled row of the maps' boxes: 64 (128-byte swizzle),
                               32 (64-byte) or 16 (32-byte), as the kernel's tiles are laid out */
    int tma_o;              /* a forward TMA kernel that stores O through a tensor map of it too
                               (boxes of FT_TMA_O_ROWS rows, tma_span elements) */
    int persistent;         /* a TMA kernel whose grid is at most max_resident blocks */
    int pair_blocks;        /* a unit of work is two row blocks of a head, the i-th longest and
                               the i-th shortest */
    int block_counter;      /* a persistent kernel whose blocks take their next row block from an
                               int counter at the workspace's start (FT_BLOCK_COUNTER_BYTES), zeroed
                               by the plan before it (without a workspace they take every grid-th) */
    int max_resident;       /* blocks the device holds at once; set when the kernel is loaded */
    /* The backward's kernels (ops/bwd.c): */
    int keys_per_block;     /* keys of one K/V head per block of the main kernel (the split-key
                               forward's: per round of its warps, one tile each) */
    int gqa_atomic;         /* one main block per query head, dK and dV summed in fp32 in the
                               workspace (0: one per K/V head, walking the group's query heads) */
    int deterministic;      /* additions in a fixed order, with counters in the workspace */
    int tile_dim;           /* columns of the dQ accumulator tiles in the workspace: the head dim
                               rounded up as the kernel's tiles are (0: the head dim) */
    /* The forward's split-key kernels (flash_decode_sm80): */
    int split_kv;           /* the keys of a row block split across blocks, a combine kernel after */
    int pack_gqa;           /* a block's rows: the query heads of one K/V head times the queries */
    int packed;             /* reads variable-length batches (cu_seqlens_q, cu_seqlens_k) whose
                               totals are given (a split-key kernel reads them without) */
} ft_launch_facts;

/* What a forward call asks of its kernel beyond dense tensors (runtime/args.c ft__args_needs):
 * nothing, a variable-length batch with its totals, or a KV cache (seqused_k, a block table) or
 * a variable-length batch without totals, which the split-key kernels alone read. */
enum { FT_NEEDS_DENSE = 0, FT_NEEDS_PACKED = 1, FT_NEEDS_SPLIT = 2 };

/* What a call asks for (FT_NEEDS_*), from what it gives: a KV cache (seqused_k or a block table),
 * packed queries or keys (their cu_seqlens, non-NULL) and the packed tensors' rows (total_q,
 * total_k; 0: not given). The API's arguments and the kernels' parameters both ask here. */
int ft__fwd_needs(int kv_cache, const void *cu_seqlens_q, int total_q, const void *cu_seqlens_k, int total_k);

/* Whether a kernel of facts f reads what a call of needs gives it. */
int ft__facts_take(const ft_launch_facts *f, int needs);

/* The query heads a row block of a TMA forward kernel of facts f holds at each position for
 * problem p: with pack_gqa, the query heads per K/V head where they divide 64 (a consumer
 * warpgroup's rows, the box of O's map) and the batch is dense; else 1. The grid (the plan)
 * and the maps of Q and O follow it; templates/flash_fwd_sm90.cuh (pack_shift) decides the same
 * from the kernel's parameters. */
int ft__fwd_pack(const ft_launch_facts *f, const ft_problem *p);

typedef enum ft_step_kind { FT_STEP_KERNEL = 0, FT_STEP_MEMSET = 1 } ft_step_kind;

/* The workspace a forward kernel with facts.block_counter uses: one int, zeroed before it. */
#define FT_BLOCK_COUNTER_BYTES 4

/* The rows of a box of O's tensor map (facts.tma_o): one consumer warpgroup's. */
#define FT_TMA_O_ROWS 64

typedef struct ft_launch_step {
    ft_step_kind kind;
    int kernel;             /* FT_STEP_KERNEL: which of the family's entries (0: the main one) */
    unsigned grid[3];
    unsigned block;
    unsigned smem;
    size_t ws_offset;       /* FT_STEP_MEMSET: the workspace bytes zeroed */
    size_t ws_bytes;
} ft_launch_step;

#define FT_MAX_STEPS 6

typedef struct ft_launch_plan {
    int nsteps;             /* 0: nothing to compute */
    ft_launch_step steps[FT_MAX_STEPS];
    size_t workspace_bytes; /* device memory the steps use besides the call's tensors */
    int splits;             /* the forward's split-key kernels: runs of keys per row block (1: none) */
} ft_launch_plan;

/* ---- the descriptor ------------------------------------------------------------------------ */

/* Verification bounds of one output and dtype (runtime/verify.h states the forward's reasoning,
 * ops/bwd.c the backward's). An element x passes when |x − ref| <= rtol·|ref| + ptol·mag +
 * ctol·cmag + atol·(the tensor's rms), mag being the sum of the absolute values of its terms and
 * cmag the scale of a cancellation inside them (the backward's dP − D; 0 for the forward), and
 * the whole output when its relative L2 error is at most l2; the LSE's bounds are lse_*. */
typedef struct ft_tolerance {
    double l2, rtol, ptol, atol, lse_abs, lse_rel;
    double ctol;
} ft_tolerance;

struct ft_op {
    const char *name;             /* "fwd": stored with every result, in packs */
    const char *summary;
    const ft_op_tensor *tensors;  /* ntensors entries */
    int ntensors;
    const char *const *key_fields; /* the key's fields after the dtype, NULL-ended */
    /* The checks of a call's sizes (not its pointers): FT_ERR_INVALID_ARGUMENT or
     * FT_ERR_UNSUPPORTED with the reason. */
    ft_status (*validate)(const ft_problem *p, ft_err *err);
    void (*key)(const ft_problem *p, ft_key *out);
    /* Distance between two keys of the operation; a negative value when b cannot stand in for
     * a (another dtype, head dim, causality). Smaller is nearer; ties are broken inside. */
    double (*distance)(const ft_key *a, const ft_key *b);
    double (*flops)(const ft_problem *p);
    double (*bytes)(const ft_problem *p); /* the least memory traffic: inputs read, outputs written */
    ft_tolerance (*tolerance)(int bf16);
    /* The steps of one call by a kernel with these launch facts. */
    ft_status (*plan)(const ft_launch_facts *facts, const ft_problem *p, ft_launch_plan *out, ft_err *err);
    /* Completes a key parsed from a text of an older form of the operation's key, which lacked
     * the fields whose bits are set in missing (bit i: key_fields[i]), with the values that form
     * meant; 0 when no older form lacks exactly those (the text is refused). NULL: the key never
     * had another form. */
    int (*legacy)(ft_key *k, unsigned missing);
};

/* The forward's keys whose query length bucket ("sq") is at most this are short-query (decode)
 * keys: the runtime gives their calls kernels of their own, and a short-query key and another
 * never stand in for each other (the forward's distance is -1 between them). A call of at most
 * 16 query rows per head (one new token, or a few of speculative decoding) fills at most a
 * quarter of the smallest row block of the prefill kernels (specs/flash_fwd*.lua: bm >= 64). */
#define FT_FWD_SHORT_QUERY 16

/* The operations flashtune has, NULL-ended; and one by name (NULL when unknown). */
extern const ft_op *const ft__ops[];
const ft_op *ft__op_find(const char *name);

/* The forward operation (ops/fwd.c) and the backward (ops/bwd.c). */
extern const ft_op ft__op_fwd;
extern const ft_op ft__op_bwd;

#endif
