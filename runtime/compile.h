/* Run-time compilation with NVRTC, the ptxas resource report, and the on-disk cache. */
#ifndef FT_RUNTIME_COMPILE_H
#define FT_RUNTIME_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* What ptxas reports for a kernel (-Xptxas -v). -1: not reported. */
typedef struct ft_resource_report {
    int registers;
    int barriers;
    long long smem_static;
    long long stack_frame;
    long long spill_stores;
    long long spill_loads;
} ft_resource_report;

typedef struct ft_compiled {
    unsigned char *cubin;
    size_t cubin_size;
    char *log;               /* NVRTC's log: warnings and the ptxas report; "" when empty */
    ft_resource_report report;
    double compile_ms;       /* NVRTC time; for a cache hit, the time of the original compile */
    int cache_hit;           /* 1: read from the disk cache */
} ft_compiled;

typedef struct ft_cache ft_cache;

typedef struct ft_cache_stats {
    long long hits, misses, stores;
    long long corrupt;       /* entries found corrupt (each also a miss) ... */
    long long removed;       /* ... and of those, the ones removed (not in a read-only cache) */
} ft_cache_stats;

/* Opens (creating) a cache directory. dir NULL: $FLASHTUNE_CACHE_DIR, else
 * $XDG_CACHE_HOME/flashtune, else ~/.cache/flashtune. Something there that is not a directory
 * is an error (FT_ERR_IO). Thread-safe to use once opened. */
ft_status ft__cache_open(const char *dir, ft_cache **out, ft_err *err);
void ft__cache_close(ft_cache *cache); /* NULL is a no-op */
const char *ft__cache_dir(const ft_cache *cache);
ft_cache_stats ft__cache_stats(const ft_cache *cache);

/* Looks a key up. 1: found and intact (*out filled, cache_hit = 1); 0: not there. An entry
 * that fails its checks (not a regular file, size, magic, key, header sizes and report,
 * checksum) is counted as corrupt, removed where it can be (counted as removed), and reported
 * as not there, so it is recompiled and never loaded. Never blocks on what is at the path. */
int ft__cache_get(ft_cache *cache, const uint8_t key[32], ft_compiled *out);
ft_status ft__cache_put(ft_cache *cache, const uint8_t key[32], const ft_compiled *in, ft_err *err);
/* The file an entry lives in (for tests and messages). */
void ft__cache_path(const ft_cache *cache, const uint8_t key[32], char *out, size_t cap);

/* NVRTC's version, e.g. 13.0. */
ft_status ft__nvrtc_version(int *major, int *minor, ft_err *err);

/* The key of a compilation: sha256 over a format tag, the target, the options, the NVRTC
 * version and the source. */
void ft__compile_key(const char *source, const char *arch, uint8_t key[32]);

/* Compiles one translation unit for arch ("sm_90") with NVRTC, taking it from the cache when
 * there (cache may be NULL). name is the file name shown in NVRTC's messages. On a compile
 * error the result is FT_ERR_COMPILE and err->msg holds the log's first error line; the whole
 * log stays in out->log. Thread-safe for different outputs. */
ft_status ft__compile(const char *source, const char *name, const char *arch, ft_cache *cache,
                      ft_compiled *out, ft_err *err);
void ft__compiled_free(ft_compiled *c); /* frees cubin and log; NULL is a no-op */

/* Parses a ptxas report. Returns 1 when a "Used N registers" line was found. A source of several
 * kernels: the registers, barriers and static shared memory of the one with the most registers,
 * the largest stack frame, the spills of all. */
int ft__parse_ptxas_report(const char *log, ft_resource_report *out);

/* The first line of a log that says "error" (or its first line), without the newline. */
void ft__log_first_error(const char *log, char *out, size_t cap);

/* Whether ptxas reports that it serialised a kernel's wgmma.mma_async instructions (made each
 * wait for the previous one, e.g. "(C7520) ... serialized due to program dependence on
 * compiler-inserted WG.AR in divergent path"): the kernel then runs, correctly, without the
 * asynchrony its template was written for. Fills why with the code and cause. */
int ft__log_wgmma_serialized(const char *log, char *why, size_t cap);

#endif
