/* Tests of the tuning database: schema and migrations, refusing files that are not ours,
 * find-or-insert, results, staleness, winners, queries, and several writer processes
 * (test_db_open.c: the paths and files that opening refuses, failed migrations, locks). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db_fixture.h"
#include "ft_test.h"

#define FTDB_APP_ID 0x46544442

/* ---- helpers ------------------------------------------------------------------------------ */

/* Collects query rows. */
typedef struct rows {
    int n;
    int stop_after; /* 0: never */
    ft_db_row row[64];
} rows;

static int collect(void *ud, const ft_db_row *row)
{
    rows *r = ud;
    if (r->n < (int)(sizeof r->row / sizeof r->row[0]))
        r->row[r->n] = *row;
    r->n++;
    return r->stop_after != 0 && r->n >= r->stop_after;
}

/* ---- pure functions ----------------------------------------------------------------------- */

static void test_bucket(void)
{
    ft_key b;

    fwd_key("f16", 128, 1, 2, 16, 1000, 3000, &b);
    ASSERT_STREQ(b.dtype, "f16");
    ASSERT_EQ(ft__key_get(&b, "d", 0), 128);
    ASSERT_EQ(ft__key_get(&b, "causal", 0), 1);
    ASSERT_EQ(ft__key_get(&b, "seqlen", 0), 4096);
    ASSERT_EQ(ft__key_get(&b, "bh", 0), 32);
    fwd_key("bf16", 64, 7, 3, 5, 1, 1, &b);
    ASSERT_EQ(ft__key_get(&b, "causal", 0), 1);
    ASSERT_EQ(ft__key_get(&b, "seqlen", 0), 64); /* at least 64 */
    ASSERT_EQ(ft__key_get(&b, "bh", 0), 16);
    fwd_key("bf16", 64, 0, 1, 1, 64, 64, &b);
    ASSERT_EQ(ft__key_get(&b, "causal", 0), 0);
    ASSERT_EQ(ft__key_get(&b, "seqlen", 0), 64);
    ASSERT_EQ(ft__key_get(&b, "bh", 0), 1);
    fwd_key("bf16", 64, 0, 1, 1, 65, 2, &b);
    ASSERT_EQ(ft__key_get(&b, "seqlen", 0), 128);
    fwd_key("f16", 64, 0, 4, 32, 8192, 8193, &b);
    ASSERT_EQ(ft__key_get(&b, "seqlen", 0), 16384);
    ASSERT_EQ(ft__key_get(&b, "bh", 0), 128);
    fwd_key("f16", 64, 0, 0, 0, 0, 0, &b);
    ASSERT_EQ(ft__key_get(&b, "seqlen", 0), 64);
    ASSERT_EQ(ft__key_get(&b, "bh", 0), 1);
}

static void test_status_names(void)
{
    static const char *names[] = {"ok", "wrong_result", "compile_error", "over_limits",
                                  "launch_failure", "fault", "timeout"};
    ft_result_status s;
    int i;

    for (i = 0; i < 7; i++) {
        ASSERT_STREQ(ft__result_status_name((ft_result_status)i), names[i]);
        ASSERT_EQ(ft__result_status_parse(names[i], &s), 1);
        ASSERT_EQ(s, i);
    }
    ASSERT_EQ(ft__result_status_parse("OK", &s), 0);
    ASSERT_EQ(ft__result_status_parse("", &s), 0);
    ASSERT_EQ(ft__result_status_parse(NULL, &s), 0);
    ASSERT_STREQ(ft__result_status_name((ft_result_status)99), "unknown");
}

static void test_filter_init_and_close_null(void)
{
    ft_db_filter f;

    memset(&f, 0x5a, sizeof f);
    ft__db_filter_init(&f);
    ASSERT_TRUE(f.device_name == NULL && f.dtype == NULL);
    ASSERT_EQ(f.head_dim, -1);
    ASSERT_EQ(f.causal, -1);
    ASSERT_EQ(f.winners_only, 0);
    ft__db_close(NULL);
    ASSERT_TRUE(ft__db_path(NULL) == NULL);
}

/* ---- files: create, reopen, migrate, refuse ------------------------------------------------ */

static void test_create_and_reopen(void)
{
    char dir[64], path[128], text[64];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel ker = make_kernel("d=128,bm=128", "t1");
    ft_db_result r;
    ft_db *db = NULL;
    long long dev_id = 0, ker_id = 0, again = 0;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/tuning.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_STREQ(ft__db_path(db), path);
    ASSERT_OK(ft__db_device_id(db, &dev, &dev_id, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &ker_id, &err), &err);
    r = make_result(dev_id, ker_id, "f16", 128, 1, 4096, FT_RESULT_OK, 1.25);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ft__db_close(db);
    db = NULL;

    /* What the sqlite3 shell sees. */
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "PRAGMA application_id"), FTDB_APP_ID);
    raw_text(path, "PRAGMA journal_mode", text, sizeof text);
    ASSERT_STREQ(text, "wal");
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM pragma_table_list "
                            "WHERE schema = 'main' AND name IN ('devices', 'kernels', 'results', 'meta') "
                            "AND strict = 1"), 4);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'view' "
                            "AND name IN ('v_results', 'v_winners', 'v_devices')"), 3);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_winners WHERE variant = 'd=128,bm=128' "
                            "AND seqlen_bucket = 4096 AND bh_bucket = 32 AND causal = 1"), 1);
    raw_text(path, "SELECT value FROM meta WHERE key = 'created_by'", text, sizeof text);
    ASSERT_CONTAINS(text, "flashtune ");

    /* Reopen: the data is there, the ids are stable. */
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &again, &err), &err);
    ASSERT_EQ(again, dev_id);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &again, &err), &err);
    ASSERT_EQ(again, ker_id);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 1);
    ASSERT_STREQ(got.row[0].device.name, "NVIDIA H200");
    ASSERT_STREQ(got.row[0].variant, "d=128,bm=128");
    ASSERT_STREQ(got.row[0].family, "flash_fwd_sm80");
    ASSERT_STREQ(got.row[0].arch, "sm_90");
    ASSERT_STREQ(got.row[0].template_hash, "t1");
    ASSERT_EQ(got.row[0].result.device_id, dev_id);
    ASSERT_EQ(got.row[0].result.kernel_id, ker_id);
    ASSERT_EQ(ft__key_get(&got.row[0].result.key, "seqlen", 0), 4096);
    ASSERT_EQ(ft__key_get(&got.row[0].result.key, "bh", 0), 32);
    ASSERT_EQ(got.row[0].result.seqlen_q, 4096);
    ASSERT_TRUE(got.row[0].result.median_ms == 1.25);
    ASSERT_EQ(got.row[0].result.repetitions, 50);
    ASSERT_EQ(got.row[0].device.driver_version, 13000);
    ASSERT_STREQ(got.row[0].device.nvrtc_version, "13.0");
    ASSERT_EQ(got.row[0].device.l2_bytes, 52428800);
    ASSERT_EQ(strlen(got.row[0].measured_at), 19); /* "2026-11-30 08:15:02" */
    ASSERT_EQ(got.row[0].winner, 1);
    ASSERT_EQ(got.row[0].stale, 0);
    ft__db_close(db);
    remove_dir(dir);
}

static void test_default_path(void)
{
    char dir[64], want[256], saved_db[512] = "", saved_xdg[512] = "", saved_home[512] = "";
    const char *v;
    ft_db *db = NULL;
    ft_err err;
    struct stat st;
    int had_db, had_xdg, had_home;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    v = getenv("FLASHTUNE_DB");
    had_db = v != NULL;
    if (had_db)
        snprintf(saved_db, sizeof saved_db, "%s", v);
    v = getenv("XDG_DATA_HOME");
    had_xdg = v != NULL;
    if (had_xdg)
        snprintf(saved_xdg, sizeof saved_xdg, "%s", v);
    v = getenv("HOME");
    had_home = v != NULL;
    if (had_home)
        snprintf(saved_home, sizeof saved_home, "%s", v);

    /* $FLASHTUNE_DB, its directory created */
    snprintf(want, sizeof want, "%s/a/b/mine.db", dir);
    setenv("FLASHTUNE_DB", want, 1);
    ASSERT_OK(ft__db_open(NULL, 0, &db, &err), &err);
    ASSERT_STREQ(ft__db_path(db), want);
    ft__db_close(db);
    ASSERT_EQ(stat(want, &st), 0);

    /* $XDG_DATA_HOME/flashtune/tuning.db */
    unsetenv("FLASHTUNE_DB");
    snprintf(want, sizeof want, "%s/xdg", dir);
    setenv("XDG_DATA_HOME", want, 1);
    snprintf(want, sizeof want, "%s/xdg/flashtune/tuning.db", dir);
    ASSERT_OK(ft__db_open(NULL, 0, &db, &err), &err);
    ASSERT_STREQ(ft__db_path(db), want);
    ft__db_close(db);
    ASSERT_EQ(stat(want, &st), 0);

    /* ~/.local/share/flashtune/tuning.db */
    unsetenv("XDG_DATA_HOME");
    snprintf(want, sizeof want, "%s/home", dir);
    setenv("HOME", want, 1);
    snprintf(want, sizeof want, "%s/home/.local/share/flashtune/tuning.db", dir);
    ASSERT_OK(ft__db_open(NULL, 0, &db, &err), &err);
    ASSERT_STREQ(ft__db_path(db), want);
    ft__db_close(db);
    ASSERT_EQ(stat(want, &st), 0);

    if (had_db)
        setenv("FLASHTUNE_DB", saved_db, 1);
    if (had_xdg)
        setenv("XDG_DATA_HOME", saved_xdg, 1);
    if (had_home)
        setenv("HOME", saved_home, 1);
    else
        unsetenv("HOME");
    remove_dir(dir);
}

/* A file stamped as ours but at schema 0 with no tables (as if created by hand) is brought
 * to the current version; opening it again changes nothing. */
static void test_migration_from_version_0(void)
{
    char dir[64], path[128], sql[128];
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/old.db", dir);
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 0;", FTDB_APP_ID);
    ASSERT_EQ(raw_exec(path, sql), SQLITE_OK);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema"), 0);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    db = NULL;
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"), 5);
    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err); /* read-only: already current */
    ft__db_close(db);
    remove_dir(dir);
}

static void test_newer_schema_refused(void)
{
    char dir[64], path[128], sql[128], want[256];
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/future.db", dir);
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 7; "
                              "CREATE TABLE hologram (x);", FTDB_APP_ID);
    ASSERT_EQ(raw_exec(path, sql), SQLITE_OK);
    snprintf(want, sizeof want, "%s was written by a newer flashtune (schema 7; this one reads up to %d)",
             path, FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_TRUE(db == NULL);
    ASSERT_STREQ(err.msg, want);
    ASSERT_EQ(ft__db_open(path, 1, &db, &err), FT_ERR_DATABASE);
    ASSERT_STREQ(err.msg, want);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 7); /* untouched */
    remove_dir(dir);
}

static void test_not_a_database(void)
{
    char dir[64], path[128];
    unsigned char bytes[8192], after[8192];
    ft_db *db = NULL;
    ft_err err;
    FILE *f;
    size_t i;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/noise.db", dir);
    srand(1234);
    for (i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(rand() >> 7);
    f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fwrite(bytes, 1, sizeof bytes, f), sizeof bytes);
    fclose(f);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_TRUE(db == NULL);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "file is not a database");
    ASSERT_EQ(ft__db_open(path, 1, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, "file is not a database");
    /* and the file is left alone */
    f = fopen(path, "rb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fread(after, 1, sizeof after, f), sizeof after);
    fclose(f);
    ASSERT_EQ(memcmp(bytes, after, sizeof bytes), 0);
    remove_dir(dir);
}

static void test_foreign_database(void)
{
    char dir[64], path[128];
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    /* someone else's tables */
    snprintf(path, sizeof path, "%s/people.db", dir);
    ASSERT_EQ(raw_exec(path, "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');"),
              SQLITE_OK);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_TRUE(db == NULL);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "is an SQLite database but not a flashtune tuning database");
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema"), 1);
    /* another application's id, no tables */
    snprintf(path, sizeof path, "%s/other_app.db", dir);
    ASSERT_EQ(raw_exec(path, "PRAGMA application_id = 305419896;"), SQLITE_OK);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, "application_id 0x12345678");
    /* no application id, but a schema version of someone else */
    snprintf(path, sizeof path, "%s/versioned.db", dir);
    ASSERT_EQ(raw_exec(path, "PRAGMA user_version = 3;"), SQLITE_OK);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, "user_version 3");
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 3);
    remove_dir(dir);
}

static void test_zero_length_file(void)
{
    char dir[64], path[128];
    ft_db *db = NULL;
    ft_err err;
    int fd;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/empty.db", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd >= 0);
    close(fd);
    /* read-only cannot initialise it */
    ASSERT_EQ(ft__db_open(path, 1, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "empty");
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "PRAGMA application_id"), FTDB_APP_ID);
    remove_dir(dir);
}

static void test_missing_file_read_only(void)
{
    char dir[64], path[128];
    ft_db *db = NULL;
    ft_err err;
    struct stat st;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/nothing.db", dir);
    ASSERT_EQ(ft__db_open(path, 1, &db, &err), FT_ERR_DATABASE);
    ASSERT_TRUE(db == NULL);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "no such file");
    ASSERT_NE(stat(path, &st), 0); /* not created */
    snprintf(path, sizeof path, "%s/no/such/dir/x.db", dir);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, path);
    remove_dir(dir);
}

/* ---- devices, kernels, results ------------------------------------------------------------ */

static void test_find_or_insert(void)
{
    char dir[64], path[128], text[64];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel ker = make_kernel("d=64", "t1");
    ft_db *db = NULL;
    long long a = 0, b = 0;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);

    ASSERT_OK(ft__db_device_id(db, &dev, &a, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &b, &err), &err);
    ASSERT_EQ(a, b);
    dev.driver_version = 13010; /* another fingerprint */
    ASSERT_OK(ft__db_device_id(db, &dev, &b, &err), &err);
    ASSERT_NE(a, b);
    dev = make_device("NVIDIA H200", 13000);
    dev.l2_bytes = 1; /* every field is part of it */
    ASSERT_OK(ft__db_device_id(db, &dev, &b, &err), &err);
    ASSERT_NE(a, b);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM devices"), 3);

    /* kernels: (source_hash, arch) */
    ker.cubin = NULL; /* did not compile (yet) */
    ker.cubin_size = 0;
    ASSERT_OK(ft__db_kernel_id(db, &ker, &a, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &b, &err), &err);
    ASSERT_EQ(a, b);
    ASSERT_EQ(raw_int(path, "SELECT cubin IS NULL FROM kernels"), 1);
    ker = make_kernel("d=64", "t1"); /* now with a cubin: the same kernel, updated */
    ker.registers = 96;
    ASSERT_OK(ft__db_kernel_id(db, &ker, &b, &err), &err);
    ASSERT_EQ(a, b);
    ASSERT_EQ(raw_int(path, "SELECT length(cubin) FROM kernels"), 4);
    ASSERT_EQ(raw_int(path, "SELECT registers FROM kernels"), 96);
    ker.cubin = NULL; /* a missing cubin does not erase the stored one */
    ker.registers = 7;
    ASSERT_OK(ft__db_kernel_id(db, &ker, &b, &err), &err);
    ASSERT_EQ(a, b);
    ASSERT_EQ(raw_int(path, "SELECT length(cubin) FROM kernels"), 4);
    ASSERT_EQ(raw_int(path, "SELECT registers FROM kernels"), 96);
    ker = make_kernel("d=64", "t2"); /* a new template hash, same source: updated in place */
    ASSERT_OK(ft__db_kernel_id(db, &ker, &b, &err), &err);
    ASSERT_EQ(a, b);
    raw_text(path, "SELECT template_hash FROM kernels", text, sizeof text);
    ASSERT_STREQ(text, "t2");
    snprintf(ker.arch, sizeof ker.arch, "sm_80"); /* another arch: another kernel */
    ASSERT_OK(ft__db_kernel_id(db, &ker, &b, &err), &err);
    ASSERT_NE(a, b);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM kernels"), 2);
    ker.source_hash[0] = '\0';
    ASSERT_EQ(ft__db_kernel_id(db, &ker, &b, &err), FT_ERR_INVALID_ARGUMENT);
    ft__db_close(db);
    remove_dir(dir);
}

static void test_record_and_replace(void)
{
    char dir[64], path[128], text[128];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel ker = make_kernel("d=64", "t1");
    ft_db_result r;
    ft_db *db = NULL;
    long long d = 0, k = 0;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &k, &err), &err);

    r = make_result(d, k, "f16", 64, 0, 1024, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d, k, "f16", 64, 0, 1000, FT_RESULT_WRONG_RESULT, 1.0); /* same bucket */
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 1);
    raw_text(path, "SELECT status || ' ' || reason || ' ' || seqlen_q FROM results", text, sizeof text);
    ASSERT_STREQ(text, "wrong_result because wrong_result 1000");
    /* the versions it was measured under come from the device and kernel */
    raw_text(path, "SELECT driver_version || ' ' || nvrtc_version || ' ' || template_hash FROM results",
             text, sizeof text);
    ASSERT_STREQ(text, "13000 13.0 t1");
    r = make_result(d, k, "f16", 64, 1, 1000, FT_RESULT_OK, 1.0); /* causal: another bucket */
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 2);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 2);
    ASSERT_EQ(got.row[0].result.status, FT_RESULT_WRONG_RESULT);
    ASSERT_STREQ(got.row[0].result.reason, "because wrong_result");
    ASSERT_EQ(got.row[0].winner, 0);
    ASSERT_EQ(got.row[1].result.status, FT_RESULT_OK);
    ASSERT_EQ(got.row[1].winner, 1);

    /* bad input */
    r.device_id = 999;
    ASSERT_EQ(ft__db_record(db, &r, &err), FT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err.msg, "no device 999");
    r.device_id = d;
    r.status = (ft_result_status)42;
    ASSERT_EQ(ft__db_record(db, &r, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 2);
    ft__db_close(db);

    /* The table itself refuses what the C code would never write. */
    ASSERT_NE(raw_exec(path, "INSERT INTO results (device_id, kernel_id, op, key, batch, heads_q, "
                             "heads_kv, seqlen_q, seqlen_k, status, driver_version, nvrtc_version, "
                             "template_hash) SELECT device_id, kernel_id, 'fwd', 'k', 1, 1, 1, 1, 1, "
                             "'splendid', 1, '1', 't' FROM results LIMIT 1"),
              SQLITE_OK);
    /* ... while the same row with a known status goes in: the refusal above is the status's */
    ASSERT_EQ(raw_exec(path, "INSERT INTO results (device_id, kernel_id, op, key, batch, heads_q, "
                             "heads_kv, seqlen_q, seqlen_k, status, driver_version, nvrtc_version, "
                             "template_hash) SELECT device_id, kernel_id, 'fwd', 'k', 1, 1, 1, 1, 1, "
                             "'ok', 1, '1', 't' FROM results LIMIT 1"),
              SQLITE_OK);
    ASSERT_NE(raw_exec(path, "UPDATE results SET batch = 'sixty-four'"), SQLITE_OK); /* STRICT */
    remove_dir(dir);
}

static void test_nan_round_trip(void)
{
    char dir[64], path[128], text[128];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel ker = make_kernel("d=64", "t1");
    ft_db_result r;
    ft_db *db = NULL;
    long long d = 0, k = 0;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    ker.compile_ms = NAN;
    ASSERT_OK(ft__db_kernel_id(db, &ker, &k, &err), &err);
    r = make_result(d, k, "f16", 64, 0, 1024, FT_RESULT_COMPILE_ERROR, NAN);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d, k, "bf16", 64, 0, 1024, FT_RESULT_OK, 0.123456789012345);
    r.max_error = 3.5e-4;
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    raw_text(path, "SELECT typeof(median_ms) || typeof(iqr_ms) || typeof(tflops) || typeof(max_error) "
                   "FROM v_results WHERE dtype = 'f16'", text, sizeof text);
    ASSERT_STREQ(text, "nullnullnullnull");
    ASSERT_EQ(raw_int(path, "SELECT compile_ms IS NULL FROM kernels"), 1);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 2);
    ASSERT_STREQ(got.row[0].result.key.dtype, "bf16");
    ASSERT_TRUE(got.row[0].result.median_ms == 0.123456789012345);
    ASSERT_TRUE(got.row[0].result.max_error == 3.5e-4);
    ASSERT_TRUE(isnan(got.row[1].result.median_ms));
    ASSERT_TRUE(isnan(got.row[1].result.iqr_ms));
    ASSERT_TRUE(isnan(got.row[1].result.tflops));
    ASSERT_TRUE(isnan(got.row[1].result.max_error));
    ASSERT_EQ(got.row[1].result.status, FT_RESULT_COMPILE_ERROR);
    ft__db_close(db);
    remove_dir(dir);
}

static void test_has_result(void)
{
    char dir[64], path[128];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel ker = make_kernel("d=64", "t1");
    ft_db_result r;
    ft_key other;
    ft_db *db = NULL;
    long long d = 0, k = 0;
    int has = -1;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_set_current(db, 13000, "13.0", "flash_fwd_sm80", "t1", &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &k, &err), &err);
    r = make_result(d, k, "f16", 64, 0, 1024, FT_RESULT_COMPILE_ERROR, NAN);
    ASSERT_OK(ft__db_has_result(db, d, k, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_has_result(db, d, k, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 1); /* any status counts: the tuner does not retry failures */
    other = r.key;
    other.fields[3].value *= 2; /* bh */
    ASSERT_OK(ft__db_has_result(db, d, k, &other, &has, &err), &err);
    ASSERT_EQ(has, 0);
    ASSERT_OK(ft__db_has_result(db, d, k + 1, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 0);
    /* stale ones do not count */
    ASSERT_OK(ft__db_set_current(db, 0, "13.1", NULL, NULL, &err), &err);
    ASSERT_OK(ft__db_has_result(db, d, k, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 0);
    ft__db_close(db);
    remove_dir(dir);
}

/* Five variants in one bucket: the fastest ok result wins, failures never do. */
/* A made-up result of kernel `variant` on the f16 d = 128 causal 4096 bucket. */
typedef struct result_case {
    const char *variant;
    ft_result_status status;
    double ms;
} result_case;

/* Records n cases on device d, their kernels' ids into k; the last result into *last. */
static void record_cases(ft_db *db, long long d, const result_case *cases, int n, long long *k, ft_db_result *last)
{
    ft_err err;
    int i;

    for (i = 0; i < n; i++) {
        ft_db_kernel ker = make_kernel(cases[i].variant, "t1");
        ASSERT_OK(ft__db_kernel_id(db, &ker, &k[i], &err), &err);
        *last = make_result(d, k[i], "f16", 128, 1, 4096, cases[i].status, cases[i].ms);
        ASSERT_OK(ft__db_record(db, last, &err), &err);
    }
}

static void test_winners(void)
{
    static const result_case cases[] = {
        {"k1", FT_RESULT_OK, 2.0},
        {"k2", FT_RESULT_OK, 1.5},
        {"k3", FT_RESULT_WRONG_RESULT, 0.5},
        {"k4", FT_RESULT_FAULT, 0.1},
        {"k5", FT_RESULT_OK, NAN}, /* not timed */
        {"k6", FT_RESULT_TIMEOUT, NAN},
    };
    char dir[64], path[128];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    long long d = 0, k[6];
    ft_db_result r;
    ft_db_row row;
    ft_key other;
    ft_db *db = NULL;
    void *cubin = NULL;
    size_t n = 0;
    int found = -1, i;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    record_cases(db, d, cases, 6, k, &r);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, &cubin, &n, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_STREQ(row.variant, "k2");
    ASSERT_EQ(row.result.kernel_id, k[1]);
    ASSERT_TRUE(row.result.median_ms == 1.5);
    ASSERT_EQ(row.winner, 1);
    ASSERT_EQ(n, 2);
    ASSERT_TRUE(cubin != NULL && memcmp(cubin, "k2", 2) == 0);
    free(cubin);
    cubin = NULL;
    /* without the cubin */
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_STREQ(row.variant, "k2");

    /* the query shows all six, ordered by time, unmeasured last, one winner */
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 6);
    ASSERT_STREQ(got.row[0].variant, "k4");
    ASSERT_STREQ(got.row[1].variant, "k3");
    ASSERT_STREQ(got.row[2].variant, "k2");
    ASSERT_STREQ(got.row[3].variant, "k1");
    ASSERT_STREQ(got.row[4].variant, "k5");
    ASSERT_STREQ(got.row[5].variant, "k6");
    for (i = 0; i < 6; i++)
        ASSERT_EQ(got.row[i].winner, i == 2);

    /* k2 turns out wrong when measured again: k1 wins */
    r = make_result(d, k[1], "f16", 128, 1, 4096, FT_RESULT_WRONG_RESULT, 1.5);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_STREQ(row.variant, "k1");
    /* a tie goes to the older result */
    r = make_result(d, k[4], "f16", 128, 1, 4096, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k1");

    /* no winner: another bucket, another device */
    other = r.key;
    other.fields[0].value = 64; /* d */
    cubin = (void *)1;
    ASSERT_OK(ft__db_winner(db, d, &other, &row, &cubin, &n, &found, &err), &err);
    ASSERT_EQ(found, 0);
    ASSERT_TRUE(cubin == NULL);
    ASSERT_EQ(n, 0);
    ASSERT_OK(ft__db_winner(db, d + 100, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 0);
    ft__db_close(db);
    remove_dir(dir);
}

static int views_agree(const char *path, const rows *got);

/* A decided winner: preferred to faster results of its key until the key is measured again. */
static void test_decided_winner(void)
{
    static const result_case cases[] = {
        {"k1", FT_RESULT_OK, 1.00},
        {"k2", FT_RESULT_OK, 1.01},
        {"k3", FT_RESULT_OK, 1.50},
        {"k4", FT_RESULT_WRONG_RESULT, 0.50},
    };
    char dir[64], path[128], text[64];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    long long d = 0, k[4];
    ft_db_result r, elsewhere;
    ft_db_row row;
    ft_db *db = NULL, *ro = NULL;
    int found = -1, i;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    record_cases(db, d, cases, 4, k, &r);
    elsewhere = make_result(d, k[0], "f16", 64, 1, 4096, FT_RESULT_OK, 0.5); /* another key */
    ASSERT_OK(ft__db_record(db, &elsewhere, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k1");
    ASSERT_EQ(row.preferred, 0);

    /* decided: k2 wins though k1 is faster, in the C query and in the file's own views */
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[1], &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_STREQ(row.variant, "k2");
    ASSERT_EQ(row.preferred, 1);
    raw_text(path, "SELECT variant FROM v_winners WHERE head_dim = 128", text, sizeof text);
    ASSERT_STREQ(text, "k2");
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_TRUE(views_agree(path, &got));
    /* a read-only handle (the runtime's) sees the decision */
    ASSERT_OK(ft__db_open(path, 1, &ro, &err), &err);
    ASSERT_OK(ft__db_winner(ro, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k2");
    ft__db_close(ro);

    /* one decision per key: deciding k3 clears k2's */
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[2], &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results WHERE preferred = 1"), 1);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k3");
    /* a result that is not ok is never decided on: the fastest wins again */
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[3], &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results WHERE preferred = 1"), 0);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k1");

    /* measuring another key leaves the decision; measuring this key again, any kernel of it, or
     * deciding on nothing, undoes it */
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[1], &err), &err);
    ASSERT_OK(ft__db_record(db, &elsewhere, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k2");
    r = make_result(d, k[2], "f16", 128, 1, 4096, FT_RESULT_OK, 1.4);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k1");
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[1], &err), &err);
    r = make_result(d, k[1], "f16", 128, 1, 4096, FT_RESULT_OK, 1.02);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k1");
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[1], &err), &err);
    ASSERT_OK(ft__db_decide(db, d, &r.key, 0, &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results WHERE preferred = 1"), 0);
    /* a stale decided result does not win */
    ASSERT_OK(ft__db_decide(db, d, &r.key, k[1], &err), &err);
    ASSERT_OK(ft__db_set_current(db, 13000, "13.0", "flash_fwd_sm80", "t2", &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 0);
    ft__db_close(db);
    remove_dir(dir);
}

/* Compares the C query's stale and winner flags with the file's own views, as a person
 * with the sqlite3 shell would see them. */
static int views_agree(const char *path, const rows *got)
{
    sqlite3 *sq = NULL;
    sqlite3_stmt *s = NULL;
    int i = 0, ok = 1;

    sqlite3_open_v2(path, &sq, SQLITE_OPEN_READONLY, NULL);
    if (sqlite3_prepare_v2(sq, "SELECT variant, stale, winner FROM v_results ORDER BY device, "
                           "device_id, dtype, head_dim, causal, seqlen_bucket, bh_bucket, "
                           "median_ms IS NULL, median_ms, result_id", -1, &s, NULL) != SQLITE_OK) {
        fprintf(stderr, "views_agree: %s\n", sqlite3_errmsg(sq));
        ok = 0;
    }
    while (ok && sqlite3_step(s) == SQLITE_ROW) {
        if (i >= got->n || strcmp((const char *)sqlite3_column_text(s, 0), got->row[i].variant) != 0 ||
            sqlite3_column_int(s, 1) != got->row[i].stale ||
            sqlite3_column_int(s, 2) != got->row[i].winner) {
            fprintf(stderr, "views_agree: row %d differs\n", i);
            ok = 0;
        }
        i++;
    }
    sqlite3_finalize(s);
    sqlite3_close(sq);
    return ok && i == got->n;
}

/* A new template hash makes earlier results stale: shown, flagged, never winning, until
 * measured again. */
static void test_stale_template(void)
{
    char dir[64], path[128];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel k1 = make_kernel("k1", "t1"), k2 = make_kernel("k2", "t1");
    ft_db_kernel other = make_kernel("o1", "x1");
    long long d = 0, id1 = 0, id2 = 0, ido = 0, again = 0;
    ft_db_result r;
    ft_db_row row;
    ft_db *db = NULL;
    int found = -1, has = -1;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_set_current(db, 13000, "13.0", "flash_fwd_sm80", "t1", &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &k1, &id1, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &k2, &id2, &err), &err);
    snprintf(other.family, sizeof other.family, "flash_fwd_sm90a");
    ASSERT_OK(ft__db_kernel_id(db, &other, &ido, &err), &err);
    r = make_result(d, id1, "f16", 64, 0, 2048, FT_RESULT_OK, 1.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d, id2, "f16", 64, 0, 2048, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d, ido, "f16", 64, 1, 2048, FT_RESULT_OK, 3.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d, id1, "f16", 64, 0, 2048, FT_RESULT_OK, 1.0);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k1");

    /* the template changes */
    ASSERT_OK(ft__db_set_current(db, 0, NULL, "flash_fwd_sm80", "t2", &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 0);
    ASSERT_OK(ft__db_has_result(db, d, id1, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 0);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 3);
    ASSERT_STREQ(got.row[0].variant, "k1");
    ASSERT_EQ(got.row[0].stale, 1);
    ASSERT_EQ(got.row[0].winner, 0);
    ASSERT_EQ(got.row[1].stale, 1);
    ASSERT_STREQ(got.row[2].variant, "o1"); /* another family: not affected */
    ASSERT_EQ(got.row[2].stale, 0);
    ASSERT_EQ(got.row[2].winner, 1);
    ASSERT_TRUE(views_agree(path, &got));

    /* k2 is compiled from the new template (same source) and measured again: it wins */
    k2 = make_kernel("k2", "t2");
    ASSERT_OK(ft__db_kernel_id(db, &k2, &again, &err), &err);
    ASSERT_EQ(again, id2);
    r = make_result(d, id2, "f16", 64, 0, 2048, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_STREQ(row.variant, "k2");
    ASSERT_STREQ(row.template_hash, "t2");
    ASSERT_EQ(row.stale, 0);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_STREQ(got.row[0].variant, "k1");
    ASSERT_EQ(got.row[0].stale, 1);
    ASSERT_STREQ(got.row[1].variant, "k2");
    ASSERT_EQ(got.row[1].winner, 1);
    ASSERT_TRUE(views_agree(path, &got));
    ft__db_close(db);
    db = NULL;

    /* The current versions are in the file: a new handle starts from them. */
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_STREQ(row.variant, "k2");
    ft__db_close(db);
    remove_dir(dir);
}

typedef struct dev_list {
    int n;
    char name[4][128];
    long long id[4], results[4], winners[4];
    int stop_after;
} dev_list;

static int collect_device(void *ud, long long id, const ft_db_device *dev, long long results,
                          long long winners)
{
    dev_list *l = ud;
    if (l->n < 4) {
        snprintf(l->name[l->n], sizeof l->name[0], "%s", dev->name);
        l->id[l->n] = id;
        l->results[l->n] = results;
        l->winners[l->n] = winners;
    }
    l->n++;
    return l->stop_after != 0 && l->n >= l->stop_after;
}

/* A new driver makes the results of the old one stale. */
static void test_stale_driver_and_devices(void)
{
    char dir[64], path[128];
    ft_db_device old_dev = make_device("NVIDIA H200", 13000);
    ft_db_device new_dev = make_device("NVIDIA H200", 13010);
    ft_db_device a100 = make_device("NVIDIA A100-SXM4-80GB", 13000);
    ft_db_kernel ker = make_kernel("k1", "t1");
    long long d_old = 0, d_new = 0, d_a = 0, k = 0;
    ft_db_result r;
    ft_db_row row;
    ft_db *db = NULL;
    int found = -1;
    dev_list l;
    rows got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &old_dev, &d_old, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &a100, &d_a, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &k, &err), &err);
    r = make_result(d_old, k, "f16", 64, 0, 1024, FT_RESULT_OK, 1.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d_old, k, "f16", 64, 0, 8192, FT_RESULT_OK, 9.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(d_a, k, "f16", 64, 0, 1024, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d_old, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);

    ASSERT_OK(ft__db_set_current(db, 13010, NULL, NULL, NULL, &err), &err);
    ASSERT_OK(ft__db_winner(db, d_old, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 0);
    ASSERT_OK(ft__db_device_id(db, &new_dev, &d_new, &err), &err);
    ASSERT_NE(d_new, d_old);
    r = make_result(d_new, k, "f16", 64, 0, 1024, FT_RESULT_OK, 1.1);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_OK(ft__db_winner(db, d_new, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_EQ(row.device.driver_version, 13010);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 4);
    ASSERT_TRUE(views_agree(path, &got));

    /* devices, by name, with their counts */
    memset(&l, 0, sizeof l);
    ASSERT_OK(ft__db_devices(db, collect_device, &l, &err), &err);
    ASSERT_EQ(l.n, 3);
    ASSERT_STREQ(l.name[0], "NVIDIA A100-SXM4-80GB");
    ASSERT_EQ(l.results[0], 1);
    ASSERT_EQ(l.winners[0], 0); /* measured under driver 13000: stale */
    ASSERT_EQ(l.id[1], d_old);
    ASSERT_EQ(l.results[1], 2);
    ASSERT_EQ(l.winners[1], 0);
    ASSERT_EQ(l.id[2], d_new);
    ASSERT_EQ(l.results[2], 1);
    ASSERT_EQ(l.winners[2], 1);
    memset(&l, 0, sizeof l);
    l.stop_after = 1;
    ASSERT_OK(ft__db_devices(db, collect_device, &l, &err), &err);
    ASSERT_EQ(l.n, 1);
    ft__db_close(db);
    remove_dir(dir);
}

static void test_query_filters_and_order(void)
{
    char dir[64], path[128];
    ft_db_device h200 = make_device("NVIDIA H200", 13000);
    ft_db_device a100 = make_device("NVIDIA A100-SXM4-80GB", 13000);
    ft_db_kernel ka = make_kernel("ka", "t1"), kb = make_kernel("kb", "t1");
    long long dh = 0, da = 0, a = 0, b = 0;
    ft_db_filter f;
    ft_db_result r;
    ft_db *db = NULL;
    rows got;
    ft_err err;
    int i;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &h200, &dh, &err), &err); /* inserted first */
    ASSERT_OK(ft__db_device_id(db, &a100, &da, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ka, &a, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &kb, &b, &err), &err);
    /* inserted in an order unlike the expected one */
    r = make_result(dh, a, "f16", 128, 1, 4096, FT_RESULT_OK, 3.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(dh, b, "f16", 128, 1, 4096, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(dh, a, "f16", 128, 1, 1024, FT_RESULT_OK, 1.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(dh, a, "bf16", 64, 0, 1024, FT_RESULT_OVER_LIMITS, NAN);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(dh, b, "bf16", 64, 0, 1024, FT_RESULT_OK, 0.5);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(dh, a, "f16", 64, 0, 1024, FT_RESULT_OK, 0.7);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    r = make_result(da, a, "f16", 128, 1, 4096, FT_RESULT_OK, 5.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);

    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 7);
    /* A100 (by name) first; then H200: bf16 < f16; 64 < 128; seqlen 1024 < 4096; time */
    ASSERT_STREQ(got.row[0].device.name, "NVIDIA A100-SXM4-80GB");
    ASSERT_STREQ(got.row[1].result.key.dtype, "bf16");
    ASSERT_STREQ(got.row[1].variant, "kb"); /* 0.5 ms before unmeasured */
    ASSERT_STREQ(got.row[2].variant, "ka");
    ASSERT_TRUE(isnan(got.row[2].result.median_ms));
    ASSERT_EQ(ft__key_get(&got.row[3].result.key, "d", 0), 64);
    ASSERT_STREQ(got.row[3].result.key.dtype, "f16");
    ASSERT_EQ(ft__key_get(&got.row[4].result.key, "seqlen", 0), 1024);
    ASSERT_EQ(ft__key_get(&got.row[4].result.key, "d", 0), 128);
    ASSERT_STREQ(got.row[5].variant, "kb");
    ASSERT_TRUE(got.row[5].result.median_ms == 2.0);
    ASSERT_STREQ(got.row[6].variant, "ka");
    ASSERT_TRUE(got.row[6].result.median_ms == 3.0);
    ASSERT_TRUE(views_agree(path, &got));

    ft__db_filter_init(&f);
    f.device_name = "h200"; /* a substring, any case */
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, &f, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 6);
    for (i = 0; i < got.n; i++)
        ASSERT_EQ(got.row[i].result.device_id, dh);

    ft__db_filter_init(&f);
    f.dtype = "bf16";
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, &f, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 2);

    ft__db_filter_init(&f);
    f.head_dim = 128;
    f.causal = 1;
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, &f, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 4);
    f.causal = 0;
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, &f, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 0);

    ft__db_filter_init(&f);
    f.winners_only = 1;
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, &f, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 5); /* A100 4096; H200 bf16-64-1024, f16-64-1024, f16-128-1024, f16-128-4096 */
    for (i = 0; i < got.n; i++)
        ASSERT_EQ(got.row[i].winner, 1);
    ASSERT_STREQ(got.row[1].variant, "kb");
    ASSERT_STREQ(got.row[4].variant, "kb");

    ft__db_filter_init(&f);
    f.winners_only = 1;
    f.device_name = "A100";
    f.dtype = "f16";
    f.head_dim = 128;
    f.causal = 1;
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_query(db, &f, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 1);
    ASSERT_TRUE(got.row[0].result.median_ms == 5.0);

    /* the callback stops it */
    memset(&got, 0, sizeof got);
    got.stop_after = 2;
    ASSERT_OK(ft__db_query(db, NULL, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 2);
    ft__db_close(db);
    remove_dir(dir);
}

static void test_read_only(void)
{
    char dir[64], path[128], text[64];
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_device unknown = make_device("NVIDIA B200", 13000);
    ft_db_kernel ker = make_kernel("k1", "t1");
    long long d = 0, k = 0, id = 0;
    ft_db_result r;
    ft_db *db = NULL;
    int has = -1;
    long long count = 0;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_set_current(db, 13000, "13.0", "flash_fwd_sm80", "t1", &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &k, &err), &err);
    r = make_result(d, k, "f16", 64, 0, 1024, FT_RESULT_OK, 1.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ft__db_close(db);
    db = NULL;

    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ASSERT_OK(ft__db_query(db, NULL, count_row, &count, &err), &err);
    ASSERT_EQ(count, 1);
    ASSERT_OK(ft__db_device_id(db, &dev, &id, &err), &err);
    ASSERT_EQ(id, d);
    ASSERT_OK(ft__db_kernel_id(db, &ker, &id, &err), &err);
    ASSERT_EQ(id, k);
    ASSERT_EQ(ft__db_device_id(db, &unknown, &id, &err), FT_ERR_NOT_FOUND);
    ASSERT_CONTAINS(err.msg, "NVIDIA B200");
    ASSERT_EQ(ft__db_record(db, &r, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "readonly");
    /* the handle's own current versions, not written to the file */
    ASSERT_OK(ft__db_has_result(db, d, k, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 1);
    ASSERT_OK(ft__db_set_current(db, 0, NULL, "flash_fwd_sm80", "t9", &err), &err);
    ASSERT_OK(ft__db_has_result(db, d, k, &r.key, &has, &err), &err);
    ASSERT_EQ(has, 0);
    raw_text(path, "SELECT value FROM meta WHERE key = 'template_hash/flash_fwd_sm80'", text, sizeof text);
    ASSERT_STREQ(text, "t1");
    ft__db_close(db);
    remove_dir(dir);
}

/* ---- several writers ---------------------------------------------------------------------- */

#define WRITERS 4
#define PER_WRITER 200

static int writer(const char *path, int w, int start_fd)
{
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel shared = make_kernel("shared", "t1"), own;
    long long d = 0, ks = 0, ko = 0;
    ft_db *db = NULL;
    ft_err err;
    char name[32], c;
    int i, rc = 1;

    if (read(start_fd, &c, 1) < 0) /* wait for the others: returns at EOF */
        goto out;
    snprintf(name, sizeof name, "own%d", w);
    own = make_kernel(name, "t1");
    if (ft__db_open(path, 0, &db, &err) != FT_OK || ft__db_device_id(db, &dev, &d, &err) != FT_OK ||
        ft__db_kernel_id(db, &shared, &ks, &err) != FT_OK ||
        ft__db_kernel_id(db, &own, &ko, &err) != FT_OK)
        goto fail;
    for (i = 0; i < PER_WRITER; i++) {
        ft_db_result r = make_result(d, i % 2 ? ks : ko, "f16", w * 1000 + i, i % 3 == 0, 1024,
                                     FT_RESULT_OK, 1.0 + i);
        if (ft__db_record(db, &r, &err) != FT_OK)
            goto fail;
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "writer %d: %s\n", w, err.msg);
out:
    ft__db_close(db);
    return rc;
}

static void test_concurrent_writers(void)
{
    char dir[64], path[128], text[64];
    pid_t pids[WRITERS];
    int fds[2], i, status;
    ft_db *db = NULL;
    long long count = 0;
    ft_db_filter f;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/shared.db", dir);
    ASSERT_EQ(pipe(fds), 0);
    /* The writers start together on a file that does not exist yet: they also race to
     * create it and to add the same device and kernel. */
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < WRITERS; i++) {
        pids[i] = fork();
        ASSERT_TRUE(pids[i] >= 0);
        if (pids[i] == 0) {
            close(fds[1]);
            _exit(writer(path, i, fds[0]));
        }
    }
    close(fds[0]);
    close(fds[1]);
    for (i = 0; i < WRITERS; i++) {
        ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
    }
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_query(db, NULL, count_row, &count, &err), &err);
    ASSERT_EQ(count, WRITERS * PER_WRITER);
    ft__db_filter_init(&f);
    f.winners_only = 1;
    count = 0;
    ASSERT_OK(ft__db_query(db, &f, count_row, &count, &err), &err);
    ASSERT_EQ(count, WRITERS * PER_WRITER); /* every result is alone in its bucket */
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), WRITERS * PER_WRITER);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM devices"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM kernels"), WRITERS + 1);
    raw_text(path, "PRAGMA integrity_check", text, sizeof text);
    ASSERT_STREQ(text, "ok");
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    remove_dir(dir);
}

FT_TEST_MAIN(FT_CASE(test_bucket), FT_CASE(test_status_names),
             FT_CASE(test_filter_init_and_close_null), FT_CASE(test_create_and_reopen),
             FT_CASE(test_default_path), FT_CASE(test_migration_from_version_0),
             FT_CASE(test_newer_schema_refused),
             FT_CASE(test_not_a_database), FT_CASE(test_foreign_database),
             FT_CASE(test_zero_length_file), FT_CASE(test_missing_file_read_only),
             FT_CASE(test_find_or_insert), FT_CASE(test_record_and_replace),
             FT_CASE(test_nan_round_trip), FT_CASE(test_has_result), FT_CASE(test_winners), FT_CASE(test_decided_winner),
             FT_CASE(test_stale_template), FT_CASE(test_stale_driver_and_devices),
             FT_CASE(test_query_filters_and_order), FT_CASE(test_read_only),
             FT_CASE(test_concurrent_writers))
