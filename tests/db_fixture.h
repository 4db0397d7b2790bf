/* Helpers of the tuning-database tests (test_db.c, test_misses.c): scratch directories, raw
 * SQL on a second connection, and made-up devices, kernels and results. */
#ifndef FT_TESTS_DB_FIXTURE_H
#define FT_TESTS_DB_FIXTURE_H

#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "tuning_db/db.h"

/* The forward's key of a call (the old bucket's arguments). */
static void fwd_key(const char *dtype, int head_dim, int causal, int batch, int heads_q, int seqlen_q, int seqlen_k,
                    ft_key *out)
{
    ft__key_of(&ft__op_fwd, dtype, head_dim, causal, 0, batch, heads_q, heads_q, seqlen_q, seqlen_k, out);
}

/* A fresh scratch directory. */
static int make_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/ft_test_db.XXXXXX");
    return mkdtemp(dir) != NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_dir(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* One value of a query on a separate connection (as the sqlite3 shell would see it). */
static long long raw_int(const char *path, const char *sql)
{
    sqlite3 *sq = NULL;
    sqlite3_stmt *s = NULL;
    long long v = -999;

    if (sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(sq, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    else
        fprintf(stderr, "raw_int(%s): %s\n", sql, sqlite3_errmsg(sq));
    sqlite3_finalize(s);
    sqlite3_close(sq);
    return v;
}

static void raw_text(const char *path, const char *sql, char *out, size_t cap)
{
    sqlite3 *sq = NULL;
    sqlite3_stmt *s = NULL;

    out[0] = '\0';
    if (sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(sq, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        snprintf(out, cap, "%s", (const char *)sqlite3_column_text(s, 0));
    else
        snprintf(out, cap, "error: %s", sqlite3_errmsg(sq));
    sqlite3_finalize(s);
    sqlite3_close(sq);
}

/* Copies a file byte for byte; 1 on success. */
static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = a != NULL && b != NULL;

    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a != NULL)
        fclose(a);
    if (b != NULL && fclose(b) != 0)
        ok = 0;
    return ok;
}

/* The schema-2 database a tune of flashtune 0.1 wrote (tests/fixtures/tuning-v2.db: both
 * families, 24 buckets, 2 misses), copied to path; 1 on success. */
#define FT_FIXTURE_V2 FT_SOURCE_DIR "/tests/fixtures/tuning-v2.db"

/* Runs SQL on a read-write connection; returns the SQLite code. */
static int raw_exec(const char *path, const char *sql)
{
    sqlite3 *sq = NULL;
    int rc = sqlite3_open(path, &sq);

    if (rc == SQLITE_OK)
        rc = sqlite3_exec(sq, sql, NULL, NULL, NULL);
    sqlite3_close(sq);
    return rc;
}

static ft_db_device make_device(const char *name, int driver)
{
    ft_db_device d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", name);
    d.cc = 90;
    d.sms = 132;
    d.smem_per_block = 232448;
    d.smem_per_sm = 233472;
    d.l2_bytes = 52428800;
    d.driver_version = driver;
    snprintf(d.nvrtc_version, sizeof d.nvrtc_version, "13.0");
    return d;
}

/* A kernel whose source hash, cubin and source derive from its variant text. */
static ft_db_kernel make_kernel(const char *variant, const char *template_hash)
{
    ft_db_kernel k;
    memset(&k, 0, sizeof k);
    snprintf(k.family, sizeof k.family, "flash_fwd_sm80");
    snprintf(k.variant, sizeof k.variant, "%s", variant);
    snprintf(k.arch, sizeof k.arch, "sm_90");
    snprintf(k.template_hash, sizeof k.template_hash, "%s", template_hash);
    snprintf(k.source_hash, sizeof k.source_hash, "src:%s", variant);
    snprintf(k.entry, sizeof k.entry, "ft_entry_%s", variant);
    k.source = variant;
    k.cubin = variant; /* the variant text stands in for the binary */
    k.cubin_size = strlen(variant);
    k.registers = 128;
    k.spill_stores = 0;
    k.spill_loads = 0;
    k.smem_static = 0;
    k.smem_dynamic = 49152;
    k.threads = 128;
    k.compile_ms = 512.5;
    return k;
}

static ft_db_result make_result(long long dev, long long ker, const char *dtype, int head_dim,
                                int causal, int seqlen, ft_result_status st, double ms)
{
    ft_db_result r;
    memset(&r, 0, sizeof r);
    r.device_id = dev;
    r.kernel_id = ker;
    r.batch = 2;
    r.heads_q = 16;
    r.heads_kv = 16;
    r.seqlen_q = seqlen;
    r.seqlen_k = seqlen;
    fwd_key(dtype, head_dim, causal, r.batch, r.heads_q, seqlen, seqlen, &r.key);
    r.status = st;
    if (st != FT_RESULT_OK)
        snprintf(r.reason, sizeof r.reason, "because %s", ft__result_status_name(st));
    r.median_ms = ms;
    r.iqr_ms = isnan(ms) ? NAN : ms / 100;
    r.tflops = isnan(ms) ? NAN : 100.0 / ms;
    r.max_error = st == FT_RESULT_OK ? 1e-3 : NAN;
    r.repetitions = isnan(ms) ? 0 : 50;
    return r;
}

static int count_row(void *ud, const ft_db_row *row)
{
    (void)row;
    (*(long long *)ud)++;
    return 0;
}

#endif
