/*
 * flashtune — public C API.
 *
 * This header is the contract between flashtune and the applications that link it.
 * Every function returns an ft_status; FT_OK is zero and the other codes are stable:
 * they are never renumbered, new ones are only appended.
 */
#ifndef FLASHTUNE_H
#define FLASHTUNE_H

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

/* ---- contexts ------------------------------------------------------------------------------
 * A context holds one GPU's kernels: the tuned winners it looks up, the modules it has loaded,
 * the compile cache. Create one per device and keep it; it is safe to use from several
 * threads and streams at once. */
typedef struct ft_context ft_context;

#define FT_OPTIONS_VERSION 1

typedef struct ft_context_options {
    int version;           /* FT_OPTIONS_VERSION (set by ft_context_options_init) */
    int device;            /* CUDA device ordinal; default 0 */
    const char *cache_dir; /* compile cache; NULL: $FLASHTUNE_CACHE_DIR or ~/.cache/flashtune;
                              "": none */
    const char *spec;      /* spec file the variants come from; NULL: the built-in forward spec */
    const char *variant;   /* NULL: pick per call. Otherwise every call uses this variant of the
                              spec; it may leave out d, causal and dtype, which then come from
                              the call (benchmarks and tests) */
    const char *database;  /* tuning database to take winners from; NULL: $FLASHTUNE_DB, else
                              ~/.local/share/flashtune/tuning.db, when the file exists; "": none.
                              Opened read-only. */
} ft_context_options;

/* Fills o with the defaults. o must not be NULL. */
FT_API void ft_context_options_init(ft_context_options *o);

/* Creates a context: loads the CUDA driver, checks the device, loads the spec, opens the tuning
 * database. Each kind of call (dtype, head dim, causal, sequence-length and batch·heads bucket)
 * runs the winner the database holds for this GPU and that bucket, else the winner of the
 * nearest tuned bucket with the same dtype, head dim and causality, else a built-in default;
 * with FLASHTUNE_DEBUG set in the environment each choice is printed to stderr once.
 * options may be NULL (defaults). On success *ctx is a new context; on failure *ctx is NULL and the status
 * says why (FT_ERR_NO_DRIVER, FT_ERR_NO_DEVICE, FT_ERR_SPEC, ...); ft_last_error(NULL) then
 * holds the message. ctx must not be NULL. */
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
 * strides multiples of 8 elements. */
typedef struct ft_attention_args {
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
} ft_attention_args;

/* Enqueues O = softmax(scale·Q·Kᵀ)·V on stream (a CUstream; NULL: the default stream) in
 * ctx's device context. The first call for a kind of problem compiles or loads its kernel
 * (which can take a second); later calls only launch. Returns FT_ERR_INVALID_ARGUMENT for bad
 * sizes, pointers or strides, FT_ERR_UNSUPPORTED when no kernel handles the head dim or dtype,
 * FT_ERR_CUDA when the launch fails. Thread-safe. */
FT_API ft_status ft_attention_forward(ft_context *ctx, const ft_attention_args *args, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* FLASHTUNE_H */
