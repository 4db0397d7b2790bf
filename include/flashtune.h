/*
 * flashtune — public C API.
 *
 * This header is the contract between flashtune and the applications that link it.
 * Every function returns an ft_status; FT_OK is zero and the other codes are stable:
 * they are never renumbered, new ones are only appended.
 */
#ifndef FLASHTUNE_H
#define FLASHTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions the shared library exports; everything else in it is hidden. */
#if defined(FT_BUILDING_LIBRARY) && defined(__GNUC__)
#define FT_API __attribute__((visibility("default")))
#else
#define FT_API
#endif

#define FT_VERSION_MAJOR 0
#define FT_VERSION_MINOR 1
#define FT_VERSION_PATCH 0
#define FT_VERSION_STRING "0.1.0"

typedef enum ft_status {
    FT_OK = 0,
    FT_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, a size out of range, a malformed string */
    FT_ERR_OUT_OF_MEMORY = 2,    /* a host allocation failed */
    FT_ERR_IO = 3,               /* a file could not be read or written */
    FT_ERR_SPEC = 4,             /* a Lua spec failed to load or to evaluate */
    FT_ERR_COMPILE = 5,          /* NVRTC rejected a kernel source */
    FT_ERR_NO_DRIVER = 6,        /* libcuda.so.1 could not be loaded */
    FT_ERR_NO_DEVICE = 7,        /* the driver reports no usable GPU */
    FT_ERR_CUDA = 8,             /* a CUDA driver call failed */
    FT_ERR_LIMITS = 9,           /* a kernel exceeds the device's limits */
    FT_ERR_DATABASE = 10,        /* an SQLite error, or a file that is not a tuning database */
    FT_ERR_NOT_FOUND = 11,       /* no kernel or record matches */
    FT_ERR_CORRUPT = 12,         /* a cache entry, pack or database failed its checks */
    FT_ERR_UNSUPPORTED = 13,     /* valid input that no kernel handles */
    FT_ERR_WRONG_RESULT = 14,    /* a kernel's output failed verification */
    FT_ERR_INTERNAL = 15,        /* a bug in flashtune */
    FT_ERR_INTERRUPTED = 16      /* the user interrupted a long operation */
} ft_status;

/* The name of a status code ("FT_ERR_SPEC"); never NULL, "FT_UNKNOWN_STATUS" for values
 * outside the enum. The string is static. */
FT_API const char *ft_status_name(ft_status status);

/* The library's version string, e.g. "0.1.0". Static. */
FT_API const char *ft_version(void);

/* ---- diagnostics ---------------------------------------------------------------------------
 * The library's diagnostic lines: at FT_LOG_DEBUG which kernel each kind of call runs and how it
 * was chosen, and a pack or kernel set tuned on another GPU model or driver; at FT_LOG_WARNING
 * what failed without failing a call (misses that can no longer be recorded). By default they
 * go to stderr, "flashtune: " first, the debug lines only while FLASHTUNE_DEBUG is on (set to
 * anything but "", 0, no, off or false). With a handler set every line goes to it instead,
 * without the prefix and the newline, whatever FLASHTUNE_DEBUG says; NULL restores the default.
 * Process-wide; the handler may be called from any thread that calls into flashtune, under a
 * context's lock, so it must be quick and must not call into flashtune. */
enum { FT_LOG_DEBUG = 0, FT_LOG_WARNING = 1 };
typedef void (*ft_log_fn)(void *user, int level, const char *line);
FT_API void ft_set_log_handler(ft_log_fn fn, void *user);

/* ---- contexts ------------------------------------------------------------------------------
 * A context holds one GPU's kernels: the tuned winners it looks up, the modules it has loaded,
 * the compile cache. Create one per device and keep it; it is safe to use from several
 * threads and streams at once. */
typedef struct ft_context ft_context;

#define FT_OPTIONS_VERSION 2

typedef struct ft_kernel_set ft_kernel_set; /* pretuned kernels compiled into an application */

typedef struct ft_context_options {
    int version;           /* FT_OPTIONS_VERSION (set by ft_context_options_init) */
    int device;            /* CUDA device ordinal; default 0 */
    const char *cache_dir; /* compile cache; NULL: $FLASHTUNE_CACHE_DIR or ~/.cache/flashtune;
                              "": none */
    const char *spec;      /* spec file the variants of its operation's calls come from (a
                              forward or a backward spec); NULL: the built-in forward spec. The
                              other operation's calls use the built-in specs */
    const char *variant;   /* NULL: pick per call. Otherwise every call of the spec's operation
                              uses this variant of the spec; it may leave out d, causal, dtype
                              (and the backward's det), which then come from the call
                              (benchmarks and tests) */
    const char *database;  /* tuning database to take winners from; NULL: $FLASHTUNE_DB, else
                              ~/.local/share/flashtune/tuning.db, when the file exists; "": none.
                              Opened read-only. */
    /* ---- version 2 ---- */
    const char *pack;      /* a kernel pack (`flashtune export`) to take winners from instead of
                              a database; NULL: none. Read whole, checked (every checksum) and
                              closed by ft_context_create; the context keeps its own copy.
                              A corrupt pack is FT_ERR_CORRUPT. */
    const ft_kernel_set *kernels; /* pretuned kernels compiled into the application
                              (`flashtune export --format c`) to take winners from instead of a
                              database; NULL: none. Not copied: the set and everything it points
                              to must outlive the context (the generated set is static). */
                           /* At most one of pack and kernels may be set; with either, no
                              database is opened (database must be NULL or ""), and the set's
                              winners are used exactly as a database's: the bucket's winner,
                              else the nearest tuned bucket's, else the built-in default (which
                              needs NVRTC). The set must be for the GPU's compute capability
                              (else FT_ERR_UNSUPPORTED naming both); another model or driver of
                              that capability is accepted (FLASHTUNE_DEBUG says so). */
} ft_context_options;

/* Fills o with the defaults for this header's FT_OPTIONS_VERSION. o must not be NULL.
 * ft_context_options_init(o) is a macro for ft_context_options_init_version(o,
 * FT_OPTIONS_VERSION); the function of that name (called as (ft_context_options_init)(o), or
 * by programs built against version 1) fills a version-1 structure only. version must be 1
 * or 2: only that version's fields are written, so an older, smaller structure is safe. */
FT_API void ft_context_options_init_version(ft_context_options *o, int version);
FT_API void (ft_context_options_init)(ft_context_options *o);
#define ft_context_options_init(o) ft_context_options_init_version((o), FT_OPTIONS_VERSION)

/* Creates a context: loads the CUDA driver, checks the device, loads the spec, opens the tuning
 * database. Each kind of call (dtype, head dim, causal, sequence-length and batch·heads bucket)
 * runs the winner the database holds for this GPU and that bucket, else the winner of the
 * nearest tuned bucket with the same dtype, head dim and causality, else a built-in default;
 * with FLASHTUNE_DEBUG set in the environment (to anything but "", 0, no, off or false) each
 * choice is printed to stderr once. With FLASHTUNE_RECORD_MISSES=1 (likewise), a kind of call that had no winner of its own bucket is recorded,
 * once, when its kernel is chosen, in the misses table of the database the context reads (else,
 * database NULL, of the default one, which is then created; database "" records nothing) for
 * `flashtune tune --misses`; a failure to record is printed once to stderr, never returned.
 * options may be NULL (defaults). On success *ctx is a new context; on failure *ctx is NULL and the status
 * says why (FT_ERR_NO_DRIVER, FT_ERR_NO_DEVICE, FT_ERR_SPEC, ...); ft_last_error(NULL) then
 * holds the message. ctx must not be NULL. options->version may be 1 (a version-1 structure:
 * the fields after database are not read) or 2; other values are FT_ERR_INVALID_ARGUMENT.
 * A pack or kernel set is checked before the driver is loaded, so FT_ERR_CORRUPT and
 * FT_ERR_INVALID_ARGUMENT for it come first even on a machine without a GPU. */
FT_API ft_status ft_context_create(const ft_context_options *options, ft_context **ctx);

/* Unloads every module and frees the context. NULL is a no-op. No call on ctx may be running
 * or start afterwards. */
FT_API void ft_context_destroy(ft_context *ctx);

/* The message of the last failed call on ctx from the calling thread ("" if none). With
 * ctx NULL: the last failed ft_context_create of this thread. The string stays valid until
 * the thread's next call into flashtune. Never NULL. */
FT_API const char *ft_last_error(const ft_context *ctx);

/* ---- attention ----------------------------------------------------------------------------- */
typedef enum ft_dtype { FT_F16 = 0, FT_BF16 = 1 } ft_dtype;

/* One forward attention call. Tensors are device pointers laid out
 * [batch, seqlen, heads, head_dim] up to strides: stride[0] batch, stride[1] sequence position,
 * stride[2] head, in elements; head_dim is contiguous. Pointers must be 16-byte aligned and
 * strides multiples of 8 elements.
 *
 * Versions. Set the structure up with ft_attention_args_init, which zeroes it and sets version;
 * then fill in the call. Fields are only ever appended, each new version says which, and a
 * library reads the fields of the version a structure says it has (later ones take their zero
 * defaults). Version 1 (flashtune 0.1) had no version field and began with dtype: a structure
 * whose first int is 0 or 1 (FT_F16, FT_BF16) is read as that version-1 layout, so programs built
 * against 0.1 keep working unchanged. Any other version is FT_ERR_INVALID_ARGUMENT. */
#define FT_ARGS_VERSION 5

typedef struct ft_attention_args {
    int version;           /* FT_ARGS_VERSION (ft_attention_args_init sets it) */
    ft_dtype dtype;
    int batch;
    int heads_q;           /* Q and O heads */
    int heads_kv;          /* K and V heads; heads_q must be a multiple (grouped-query attention) */
    int seqlen_q;
    int seqlen_k;
    int head_dim;
    const void *q, *k, *v;
    void *o;
    float *lse;            /* optional (NULL): fp32 [batch, heads_q, seqlen_q], natural log */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    int causal;            /* bottom-right aligned: row i sees key j iff j <= i + seqlen_k - seqlen_q;
                              a row that sees no key gets O = 0 and LSE = +inf */
    float softmax_scale;   /* 0: 1/sqrt(head_dim) */
    /* ---- version 3 ---- */
    void *workspace;       /* optional device memory for the call's launch plan (NULL: none), 16-byte
                              aligned (256 recommended); ft_attention_forward_workspace_size says
                              how much the call can use. Calls with few queries against many keys
                              split the keys across blocks and need it for their partial results;
                              without it (or with less) they run unsplit: the same result, slower.
                              A causal kernel that hands out its row blocks from a counter (the
                              sm_90a forward's balance=2) takes 4 bytes of it, zeroed on the
                              stream before it runs; without them, a fixed order: the same result.
                              The caller owns it; it must not be touched by anything else until the
                              call's work on its stream is done. */
    size_t workspace_bytes;
    /* ---- version 4: a KV cache and variable-length batches ----
     * Calls with seqused_k or block_table run the split-key kernels (the decode family, any
     * seqlen_q; made for 1 to 16 queries). Calls with cu_seqlens_q or cu_seqlens_k and neither
     * of those run them too, unless they give total_q and total_k (version 5): then any kernel
     * whose family reads packed batches (the prefill families' too) may take them. Their device
     * arrays are read by the kernels, not checked by the library: entries out of range are the
     * caller's error. */
    const int32_t *seqused_k;   /* optional [batch] int32, device: sequence b attends to its first
                                   seqused_k[b] keys, 0 to seqlen_k (a cache's current lengths);
                                   causal: row i sees key j iff j <= i + seqused_k[b] - seqlen_q.
                                   NULL: seqlen_k keys each */
    const int32_t *block_table; /* optional [batch, block_table_stride] int32, device: K and V are
                                   pools of pages, [num_pages, page_size, heads_kv, head_dim] up to
                                   strides (stride[0]: between pages); key j of sequence b is row
                                   j % page_size of page block_table[b * block_table_stride +
                                   j / page_size]. Pages may lie in any order and be shared by
                                   sequences. seqlen_k is then the most keys a sequence has */
    int page_size;              /* keys per page, with block_table: a positive multiple of 16 */
    int block_table_stride;     /* entries per sequence, with block_table: at least
                                   ceil(seqlen_k / page_size) */
    const int32_t *cu_seqlens_q; /* optional [batch + 1] int32, device: a variable-length batch.
                                   Sequence b's queries are rows cu_seqlens_q[b] to
                                   cu_seqlens_q[b + 1] - 1 of q and o, which are then
                                   [total_q, heads_q, head_dim] (stride[0] is not read;
                                   cu_seqlens_q[0] = 0, lengths 0 allowed); seqlen_q is the
                                   longest sequence's (max_seqlen_q), and the LSE is
                                   [heads_q, total_q] (total_q: the field of version 5 where
                                   given, else cu_seqlens_q[batch]) */
    const int32_t *cu_seqlens_k; /* optional [batch + 1] int32, device: likewise for k and v
                                   ([total_k, heads_kv, head_dim]; seqlen_k the longest; not with
                                   block_table; seqused_k may use fewer of them). Causal masks
                                   align each sequence's last query with its last key */
    /* ---- version 5 ---- */
    int total_q;                /* with cu_seqlens_q: the rows of q and o (at least
                                   cu_seqlens_q[batch]), 0: not given. The tensor-memory-
                                   accelerator kernels read packed tensors only as far as these
                                   say, so a variable-length call runs them only when each
                                   cu_seqlens it gives comes with its total; 0 without them */
    int total_k;                /* with cu_seqlens_k: the rows of k and v, likewise */
} ft_attention_args;

/* Zeroes a and sets a->version = version (FT_ARGS_VERSION through the macro): only the fields of
 * that version, so a program built against an older header passes its own smaller structure. a
 * must not be NULL and version must be 2 to 5 (later headers: up to their FT_ARGS_VERSION), else
 * nothing is written. */
FT_API void ft_attention_args_init_version(ft_attention_args *a, int version);
#define ft_attention_args_init(a) ft_attention_args_init_version((a), FT_ARGS_VERSION)

/* The FLOPs a forward call with these sizes does, as the FlashAttention papers count them
 * (4·batch·heads_q·seqlen_q·seqlen_k·head_dim, halved when causal): what TFLOP/s figures
 * divide. 0 when args is NULL or not a version this library reads, or its sizes are not
 * positive. The tensors are not read; no context is needed. */
FT_API double ft_attention_flops(const ft_attention_args *args);

/* The key of a forward call: the kind of call a tuned winner is chosen for, in the canonical
 * text the tuning database and packs store: the dtype, the head dim, causality, then
 * heads_q / heads_kv, seqlen_q, max(seqlen_q, seqlen_k) (at least 64) and batch·heads_q, each
 * rounded up to a power of two ({"dtype":"bf16","d":128,"causal":0,"group":8,"sq":1,
 * "seqlen":8192,"bh":1024} for a decode step of a grouped-query model), written to buf (cap bytes, cut to fit; "" on failure). FT_ERR_INVALID_ARGUMENT
 * for NULL arguments, cap 0, or sizes that are not positive. The tensors are not read; no
 * context is needed. */
FT_API ft_status ft_attention_key(const ft_attention_args *args, char *buf, size_t cap);

/* Enqueues O = softmax(scale·Q·Kᵀ)·V on stream (a CUstream; NULL: the default stream) in
 * ctx's device context. The first call for a kind of problem compiles or loads its kernel
 * (which can take a second); later calls only launch. Returns FT_ERR_INVALID_ARGUMENT for bad
 * sizes, pointers or strides, FT_ERR_UNSUPPORTED when no kernel handles the head dim or dtype
 * (the forward's kernels take every multiple of 8 from 32 to 256, the backward's too but for
 * non-causal calls of head dim 240),
 * FT_ERR_CUDA when the launch fails.
 * Thread-safe. */
FT_API ft_status ft_attention_forward(ft_context *ctx, const ft_attention_args *args, void *stream);

/* The workspace bytes a forward call with these arguments can use (args->workspace is not read):
 * 0 when its kernel needs none; for few queries against many keys, the partial results of the
 * split keys: splits · batch · heads_q · seqlen_q · (head_dim + 1) · 4 bytes, the splits chosen
 * so that about as many blocks run as the GPU holds at once (0.5 MB for 32 splits of 32 query
 * rows at head dim 128); 4 for a causal kernel that hands out its row blocks from a counter.
 * The first call for a kind of problem builds its kernel, as ft_attention_forward would. Errors as ft_attention_forward's; *bytes is 0 on
 * failure (bytes must not be NULL). Thread-safe. */
FT_API ft_status ft_attention_forward_workspace_size(ft_context *ctx, const ft_attention_args *args,
                                                     size_t *bytes);

/* ---- the backward pass ---------------------------------------------------------------------
 * dQ, dK and dV of O = softmax(scale·Q·Kᵀ)·V by recomputation: the scores are computed again
 * from Q, K and the forward's LSE, never stored. One call runs a short launch plan on the stream
 * (a preprocess kernel: D = rowsum(dO ∘ O) and the workspace initialised; the main kernel; a
 * postprocess kernel converting the fp32 sums to the element type), all in the caller's
 * workspace: nothing is allocated on the launch path.
 *
 * Tensors are device pointers laid out as the forward's ([batch, seqlen, heads, head_dim] up to
 * strides, head_dim contiguous, 16-byte aligned, strides multiples of 8 elements); each has its
 * own strides. q, k, v, o, dout and the gradients are of the call's dtype; lse is the forward's
 * (ft_attention_args.lse: fp32 [batch, heads_q, seqlen_q], contiguous, natural log, +inf for a
 * row that sees no key). dk and dv are [batch, seqlen_k, heads_kv, head_dim]: with grouped-query
 * heads, each K/V head's gradient is the sum over the query heads of its group. The outputs must
 * share no element with the inputs or each other; tensors of one layout that interleave (dq, dk
 * and dv in one packed [batch, seqlen, 3, heads, head_dim] buffer, as the forward's packed QKV)
 * are fine, other strides over common bytes are refused (FT_ERR_INVALID_ARGUMENT). causal and
 * softmax_scale must be the forward's.
 *
 * Set the structure up with ft_attention_bwd_args_init; the versioning rules are those of
 * ft_attention_args (fields are only appended; a library reads the version a structure says). */
#define FT_BWD_ARGS_VERSION 1

typedef struct ft_attention_bwd_args {
    int version;           /* FT_BWD_ARGS_VERSION (ft_attention_bwd_args_init sets it) */
    ft_dtype dtype;
    int batch;
    int heads_q;
    int heads_kv;          /* heads_q must be a multiple */
    int seqlen_q;
    int seqlen_k;
    int head_dim;
    const void *q, *k, *v;
    const void *o;         /* the forward's output */
    const void *dout;      /* the gradient of the loss with respect to o */
    const float *lse;      /* the forward's LSE */
    void *dq, *dk, *dv;    /* written whole */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3], dout_stride[3];
    int64_t dq_stride[3], dk_stride[3], dv_stride[3];
    int causal;            /* bottom-right aligned, as the forward's; a row that sees no key gets dQ = 0 */
    float softmax_scale;   /* 0: 1/sqrt(head_dim) */
    int deterministic;     /* non-zero: the fp32 sums of dQ (and of grouped dK, dV) are added in a
                              fixed order, so that every run gives the same bits; slower (about
                              20 % at d = 128 on an H200, README "Backward") */
} ft_attention_bwd_args;

/* Zeroes a and sets a->version = version (FT_BWD_ARGS_VERSION through the macro); a must not be
 * NULL and version must be 1, else nothing is written. */
FT_API void ft_attention_bwd_args_init_version(ft_attention_bwd_args *a, int version);
#define ft_attention_bwd_args_init(a) ft_attention_bwd_args_init_version((a), FT_BWD_ARGS_VERSION)

/* The FLOPs of a backward call, as the FlashAttention papers count them: 2.5 times the
 * forward's (10·batch·heads_q·seqlen_q·seqlen_k·head_dim, halved when causal). 0 for NULL,
 * another version or sizes that are not positive. No context is needed. */
FT_API double ft_attention_backward_flops(const ft_attention_bwd_args *args);

/* The bytes of workspace a backward call with these arguments needs (the tensors are not
 * read; the first call of a kind of problem builds its kernel, as ft_attention_backward
 * would): written to *bytes, 0 when the call has nothing to compute. The size depends on
 * the sizes, the dtype, causality, determinism and the kernel the context picks, so ask once
 * per kind of call and keep the largest. Thread-safe. */
FT_API ft_status ft_attention_backward_workspace_size(ft_context *ctx, const ft_attention_bwd_args *args,
                                                      size_t *bytes);

/* Enqueues the backward on stream (a CUstream; NULL: the default stream) in ctx's device
 * context. workspace is device memory of at least workspace_bytes >= the size
 * ft_attention_backward_workspace_size gives (NULL only when that is 0), 256-byte aligned
 * (cuMemAlloc's and PyTorch's allocations are); the caller owns it. The call uses it until its
 * work on the stream is done: reuse it for later calls on the same stream at once, but give
 * concurrent calls on other streams their own. Its contents before the call do not matter;
 * afterwards they are garbage. Errors as for ft_attention_forward; FT_ERR_INVALID_ARGUMENT
 * also for a workspace that is too small or misaligned. Thread-safe. */
FT_API ft_status ft_attention_backward(ft_context *ctx, const ft_attention_bwd_args *args, void *workspace,
                                       size_t workspace_bytes, void *stream);

/* Which kernel ft_attention_backward runs for these arguments and how it was chosen, as
 * ft_attention_kernel says it for the forward. */
FT_API ft_status ft_attention_backward_kernel(ft_context *ctx, const ft_attention_bwd_args *args, char *buf,
                                              size_t cap);

/* ---- pretuned kernel sets ------------------------------------------------------------------
 * `flashtune export --format c --out kernels.c` writes a C source holding one device's tuned
 * winners with their cubins as byte arrays and one `const ft_kernel_set <name>` (the output
 * file's base name, or --name). Compile it into the application and pass &<name> as
 * ft_context_options.kernels: the context then loads those cubins directly, without NVRTC or
 * a tuning database (calls of a head dim, dtype or causality the set lacks still fall back to
 * the built-in default, which NVRTC compiles). */
#define FT_KERNEL_SET_VERSION 2

typedef struct ft_kernel_set_entry {
    /* The kind of calls the entry serves (version 2: the set's keys[i] says so exactly, the
     * forward's with its group and query-length buckets too; these fields repeat what every
     * attention operation's key has). */
    ft_dtype dtype;
    int head_dim;
    int causal;                    /* 0 or 1 */
    int seqlen_bucket;             /* power of two >= 64: calls with max(seqlen_q, seqlen_k) in
                                      (seqlen_bucket / 2, seqlen_bucket] (at most 64 for 64) */
    int bh_bucket;                 /* power of two: calls with batch·heads_q in (bh_bucket / 2,
                                      bh_bucket] */
    const char *variant;           /* "d=128,bm=128,bn=64,..." */
    const char *family;            /* the kernel family ("flash_fwd_sm80"): how it is launched */
    const char *entry;             /* the kernel's function name in the cubin */
    int threads;                   /* per block */
    int rows_per_block;            /* query rows per block: grid.x = ceil(seqlen_q / rows) */
    long long smem_dynamic;        /* bytes of dynamic shared memory per block */
    const unsigned char *cubin;    /* the compiled kernel (an ELF image for the device's sm_XY) */
    size_t cubin_size;
    double median_ms;              /* what it measured on its bucket's shape */
} ft_kernel_set_entry;

struct ft_kernel_set {
    int version;                   /* FT_KERNEL_SET_VERSION */
    const char *device_name;       /* the GPU the set was tuned on: "NVIDIA H200" */
    int cc;                        /* its compute capability × 10: 90 */
    int sms;
    long long smem_per_block;      /* opt-in bytes per block */
    long long smem_per_sm;
    long long l2_bytes;
    int driver_version;            /* cuDriverGetVersion: 13000 */
    const char *nvrtc_version;     /* "13.0" */
    const char *flashtune_version; /* that wrote the set */
    const char *created;           /* UTC, "2026-11-30T08:15:02Z" */
    int count;
    const ft_kernel_set_entry *entries; /* count entries, one per bucket */
    /* ---- version 2 ---- */
    const char *const *ops;        /* count operation names, one per entry ("fwd": the forward) */
    const char *const *keys;       /* count keys, one per entry: what calls its kernel serves, the
                                      canonical text of the operation's key
                                      ({"dtype":"f16","d":128,"causal":1,"group":1,"sq":4096,
                                      "seqlen":4096,"bh":64}; a forward key without group and sq,
                                      as sets exported before they were fields have, serves
                                      prefill calls of group 1, sq = seqlen) */
};
/* A version-1 set (written by flashtune 0.1) ends before ops: its entries are forward ones, their
 * key their dtype, head_dim, causal, seqlen_bucket and bh_bucket (prefill calls: group 1,
 * sq = seqlen_bucket). Both versions are read. */

/* Which kernel ft_attention_forward runs for a call with these arguments, and how it was
 * chosen, as one line written to buf (cap bytes, NUL-terminated, cut to fit), e.g.
 * "tuned for this bucket: d=128,bm=128,bn=176,stages=2,causal=0,dtype=f16,pingpong=1,overlap=1,balance=0".
 * The arguments are checked as by ft_attention_forward (the tensors are not read); the first
 * call of a kind of problem builds its kernel as ft_attention_forward would. buf must not be
 * NULL and cap must be at least 1; on failure buf holds "". Thread-safe. */
FT_API ft_status ft_attention_kernel(ft_context *ctx, const ft_attention_args *args, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* FLASHTUNE_H */
