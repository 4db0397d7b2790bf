/*
 * flashtune — public C API.
 *
 * This header is the contract between flashtune and the applications that link it.
 * Every function returns an ft_status; FT_OK is zero and the other codes are stable:
 * they are never renumbered, new ones are only appended.
 */
#ifndef FLASHTUNE_H
#define FLASHTUNE_H

#ifdef __cplusplus
extern "C" {
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
const char *ft_status_name(ft_status status);

/* The library's version string, e.g. "0.1.0". Static. */
const char *ft_version(void);

#ifdef __cplusplus
}
#endif
#endif /* FLASHTUNE_H */
