/*
 * The compile cache: one file per compilation, <dir>/<first 2 hex digits>/<key>.ftc.
 *
 * File layout (little-endian, this machine's):
 *   magic        8 bytes  "FTCACHE1"
 *   key         32 bytes  the compilation key (must match the file name)
 *   registers, barriers                   2 × int32
 *   smem_static, stack_frame, spill_stores, spill_loads   4 × int64
 *   compile_ms                            float64
 *   log_size, cubin_size                  2 × uint64
 *   checksum    32 bytes  sha256 of everything above it and of the payload
 *   payload              log bytes, then cubin bytes
 * Files are written to a temporary name and renamed, so readers never see half an entry.
 *
 * A reader trusts nothing of it: what is not a regular file is not opened (a FIFO would block),
 * the sizes must add up to the file's before anything is summed or allocated, the report must
 * be one a compiler could have made, and only then is the checksum looked at. An entry that
 * fails is counted as corrupt and removed if it can be (a read-only cache, or a directory at
 * the entry's name, keeps it; the counts say how many were removed).
 */
#include "compile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"

#define MAGIC "FTCACHE1"
#define HEADER_SIZE (8 + 32 + 2 * 4 + 4 * 8 + 8 + 2 * 8)
#define CHECKSUM_SIZE 32
#define ENTRY_MAX ((size_t)256 << 20) /* a cubin and its log; no real one comes near */

struct ft_cache {
    char dir[4096];
    ft_cache_stats stats; /* updated with atomic adds */
};

/* A compilation's record is the cache's entry: what the compiler produces and the cache keeps. */
void ft__compiled_free(ft_compiled *c)
{
    if (c == NULL)
        return;
    free(c->cubin);
    free(c->log);
    c->cubin = NULL;
    c->log = NULL;
    c->cubin_size = 0;
}

ft_status ft__cache_open(const char *dir, ft_cache **out, ft_err *err)
{
    ft_status rc;
    ft_cache *c;

    *out = NULL;
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    if (dir != NULL && dir[0] != '\0') {
        if (strlen(dir) >= sizeof c->dir) {
            free(c);
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "cache directory path too long");
        }
        strcpy(c->dir, dir);
    } else {
        rc = ft__user_dir("FLASHTUNE_CACHE_DIR", "CACHE_HOME", ".cache", c->dir, sizeof c->dir, err);
        if (rc != FT_OK) {
            free(c);
            return rc;
        }
    }
    rc = ft__mkdirs(c->dir, err);
    if (rc == FT_OK) {
        /* mkdir -p takes an existing file of that name for the directory */
        struct stat st;
        if (stat(c->dir, &st) != 0)
            rc = ft__fail(err, FT_ERR_IO, "%s: %s", c->dir, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
            rc = ft__fail(err, FT_ERR_IO, "%s is not a directory", c->dir);
    }
    if (rc != FT_OK) {
        ft__err_prefix(err, "compile cache");
        free(c);
        return rc;
    }
    *out = c;
    return FT_OK;
}

void ft__cache_close(ft_cache *cache)
{
    free(cache);
}

const char *ft__cache_dir(const ft_cache *cache)
{
    return cache->dir;
}

ft_cache_stats ft__cache_stats(const ft_cache *cache)
{
    ft_cache_stats s;
    s.hits = __atomic_load_n(&cache->stats.hits, __ATOMIC_RELAXED);
    s.misses = __atomic_load_n(&cache->stats.misses, __ATOMIC_RELAXED);
    s.stores = __atomic_load_n(&cache->stats.stores, __ATOMIC_RELAXED);
    s.corrupt = __atomic_load_n(&cache->stats.corrupt, __ATOMIC_RELAXED);
    s.removed = __atomic_load_n(&cache->stats.removed, __ATOMIC_RELAXED);
    return s;
}

void ft__cache_path(const ft_cache *cache, const uint8_t key[32], char *out, size_t cap)
{
    char hex[65];
    ft__sha256_hex(key, hex);
    snprintf(out, cap, "%s/%.2s/%s.ftc", cache->dir, hex, hex);
}

static void put32(unsigned char **p, int32_t v)
{
    memcpy(*p, &v, 4);
    *p += 4;
}

static void put64(unsigned char **p, const void *v)
{
    memcpy(*p, v, 8);
    *p += 8;
}

static int32_t get32(const unsigned char **p)
{
    int32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

static void get64(const unsigned char **p, void *v)
{
    memcpy(v, *p, 8);
    *p += 8;
}

ft_status ft__cache_put(ft_cache *cache, const uint8_t key[32], const ft_compiled *in, ft_err *err)
{
    ft_status rc;
    char path[4200];
    size_t log_size = in->log ? strlen(in->log) : 0;
    uint64_t ls = log_size, cs = in->cubin_size;
    size_t total = HEADER_SIZE + CHECKSUM_SIZE + log_size + in->cubin_size;
    unsigned char *buf;
    unsigned char *p;
    long long v;

    /* what the reader would refuse is not written */
    if (log_size > ENTRY_MAX || in->cubin_size > ENTRY_MAX || total > ENTRY_MAX)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "a cache entry of more than %zu MiB", ENTRY_MAX >> 20);
    buf = malloc(total);
    p = buf;
    if (buf == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing a cache entry");
    memcpy(p, MAGIC, 8);
    p += 8;
    memcpy(p, key, 32);
    p += 32;
    put32(&p, in->report.registers);
    put32(&p, in->report.barriers);
    v = in->report.smem_static;
    put64(&p, &v);
    v = in->report.stack_frame;
    put64(&p, &v);
    v = in->report.spill_stores;
    put64(&p, &v);
    v = in->report.spill_loads;
    put64(&p, &v);
    put64(&p, &in->compile_ms);
    put64(&p, &ls);
    put64(&p, &cs);
    memcpy(p + CHECKSUM_SIZE, in->log ? in->log : "", log_size);
    memcpy(p + CHECKSUM_SIZE + log_size, in->cubin, in->cubin_size);
    {
        ft_sha256 s;
        ft__sha256_init(&s);
        ft__sha256_update(&s, buf, HEADER_SIZE);
        ft__sha256_update(&s, p + CHECKSUM_SIZE, log_size + in->cubin_size);
        ft__sha256_final(&s, p);
    }
    ft__cache_path(cache, key, path, sizeof path);
    {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s", path);
        *strrchr(sub, '/') = '\0';
        rc = ft__mkdirs(sub, err);
    }
    if (rc == FT_OK)
        rc = ft__write_file_atomic(path, buf, total, 0, err);
    free(buf);
    if (rc == FT_OK)
        __atomic_fetch_add(&cache->stats.stores, 1, __ATOMIC_RELAXED);
    return rc;
}

/* A report ptxas could have written: -1 (not reported) or a count within the hardware's. */
static int plausible(const ft_compiled *c)
{
    const ft_resource_report *r = &c->report;
    const long long big = 1LL << 32;

    return r->registers >= -1 && r->registers <= 255 && r->barriers >= -1 && r->barriers <= 64 &&
           r->smem_static >= -1 && r->smem_static <= big && r->stack_frame >= -1 && r->stack_frame <= big &&
           r->spill_stores >= -1 && r->spill_stores <= big && r->spill_loads >= -1 && r->spill_loads <= big &&
           isfinite(c->compile_ms) && c->compile_ms >= 0;
}

int ft__cache_get(ft_cache *cache, const uint8_t key[32], ft_compiled *out)
{
    char path[4200];
    char *data = NULL;
    size_t size = 0;
    const unsigned char *p;
    uint64_t ls, cs;
    long long v;
    uint8_t sum[32];
    ft_sha256 s;
    int ok = 0, kind;

    memset(out, 0, sizeof *out);
    ft__cache_path(cache, key, path, sizeof path);
    kind = ft__path_kind(path, NULL);
    if (kind == 0)
        goto miss;
    /* a directory, FIFO, device or dangling link at the entry's name is never opened */
    if (kind < 0 || ft__read_file_max(path, ENTRY_MAX, &data, &size, NULL) != FT_OK)
        goto corrupt;
    if (size < HEADER_SIZE + CHECKSUM_SIZE || memcmp(data, MAGIC, 8) != 0 ||
        memcmp(data + 8, key, 32) != 0)
        goto corrupt;
    p = (const unsigned char *)data + 40;
    out->report.registers = get32(&p);
    out->report.barriers = get32(&p);
    get64(&p, &v);
    out->report.smem_static = v;
    get64(&p, &v);
    out->report.stack_frame = v;
    get64(&p, &v);
    out->report.spill_stores = v;
    get64(&p, &v);
    out->report.spill_loads = v;
    get64(&p, &out->compile_ms);
    get64(&p, &ls);
    get64(&p, &cs);
    /* each size at most the file's (which is at most ENTRY_MAX): their sum cannot overflow */
    if (ls > size || cs > size || HEADER_SIZE + CHECKSUM_SIZE + ls + cs != size || cs == 0 || !plausible(out))
        goto corrupt;
    ft__sha256_init(&s);
    ft__sha256_update(&s, data, HEADER_SIZE);
    ft__sha256_update(&s, p + CHECKSUM_SIZE, ls + cs);
    ft__sha256_final(&s, sum);
    if (memcmp(sum, p, 32) != 0)
        goto corrupt;
    out->log = malloc(ls + 1);
    out->cubin = malloc(cs);
    if (out->log == NULL || out->cubin == NULL)
        goto miss_free;
    memcpy(out->log, p + CHECKSUM_SIZE, ls);
    out->log[ls] = '\0';
    memcpy(out->cubin, p + CHECKSUM_SIZE + ls, cs);
    out->cubin_size = cs;
    /* the report as this build reads the stored log (an older build may have read a
     * multi-kernel log by its last kernel only) */
    {
        ft_resource_report r;
        if (ft__parse_ptxas_report(out->log, &r))
            out->report = r;
    }
    out->cache_hit = 1;
    ok = 1;
    __atomic_fetch_add(&cache->stats.hits, 1, __ATOMIC_RELAXED);
    goto out;
corrupt:
    memset(out, 0, sizeof *out);
    __atomic_fetch_add(&cache->stats.corrupt, 1, __ATOMIC_RELAXED);
    /* counted only when it went: a read-only cache keeps its corrupt entries */
    if (unlink(path) == 0)
        __atomic_fetch_add(&cache->stats.removed, 1, __ATOMIC_RELAXED);
    goto miss;
miss_free:
    ft__compiled_free(out);
miss:
    __atomic_fetch_add(&cache->stats.misses, 1, __ATOMIC_RELAXED);
out:
    free(data);
    return ok;
}
