/* Tests of the misses the runtime library records (tuning_db, since schema 2): the migration of a
 * schema-1 file, reading one read-only without migrating it, recording and listing misses. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_fixture.h"
#include "ft_test.h"

static ft_db_miss make_miss(long long dev, const char *dtype, int head_dim, int causal, int batch, int heads,
                            int seqlen, const char *fallback)
{
    ft_db_miss m;
    memset(&m, 0, sizeof m);
    m.device_id = dev;
    m.batch = batch, m.heads_q = heads, m.heads_kv = heads, m.seqlen_q = seqlen, m.seqlen_k = seqlen;
    fwd_key(dtype, head_dim, causal, batch, heads, seqlen, seqlen, &m.key);
    snprintf(m.fallback, sizeof m.fallback, "%s", fallback);
    return m;
}

typedef struct misses {
    int n;
    ft_db_miss m[16];
} misses;

static int collect(void *ud, const ft_db_miss *m)
{
    misses *c = ud;
    if (c->n < 16)
        c->m[c->n] = *m;
    c->n++;
    return 0;
}

/* A schema-1 file as flashtune wrote it: schema 1 was schema 2 without the misses table and
 * its view, so the schema-2 fixture without them. */
static void make_v1(const char *path, long long *dev_id)
{
    ASSERT_TRUE(copy_file(FT_FIXTURE_V2, path));
    ASSERT_EQ(raw_exec(path, "DROP VIEW v_misses; DROP TABLE misses; PRAGMA user_version = 1;"), SQLITE_OK);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE name LIKE '%misses%'"), 0);
    *dev_id = raw_int(path, "SELECT id FROM devices");
}

/* A read-only handle (the runtime library's) reads a schema-1 file as it is: the winners, no
 * misses, the file untouched. */
static void test_v1_read_only(void)
{
    char dir[64], path[128];
    ft_db *db = NULL;
    ft_db_filter f;
    misses got;
    long long dev = 0, rows = 0;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/v1.db", dir);
    make_v1(path, &dev);
    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ft__db_filter_init(&f);
    f.winners_only = 1;
    ASSERT_OK(ft__db_query(db, &f, count_row, &rows, &err), &err);
    ASSERT_EQ(rows, 24);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(db, NULL, -1, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 0);
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 1);
    remove_dir(dir);
}

/* A writable open migrates 1 -> 3: the misses table and view, the results kept. */
static void test_v1_migration(void)
{
    char dir[64], path[128];
    ft_db *db = NULL;
    ft_db_miss m;
    misses got;
    long long dev = 0;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/v1.db", dir);
    make_v1(path, &dev);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'misses'"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_winners"), 24);
    m = make_miss(dev, "f16", 64, 0, 1, 512, 1024, "nearest"); /* a tuned bucket of the fixture */
    ASSERT_OK(ft__db_record_miss(db, &m, &err), &err);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(db, NULL, -1, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 1);
    ASSERT_EQ(got.m[0].tuned, 1); /* the old winner is this bucket's */
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_misses WHERE tuned = 1"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 228);
    /* the rows written before the migration keep their ids: the old results still name them */
    ASSERT_EQ(raw_int(path, "SELECT count(DISTINCT device_id) FROM results"), 1);
    ASSERT_EQ(raw_int(path, "SELECT min(device_id) FROM results"), dev);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results r JOIN kernels k ON k.id = r.kernel_id"), 228);
    remove_dir(dir);
}

/* Recording: one row per (device, bucket), count and last_seen move, the first shape stays,
 * the latest fallback wins; listing: order, filters, tuned. */
static void test_record_and_list(void)
{
    char dir[64], path[128];
    ft_db_device h200 = make_device("NVIDIA H200", 13000), other = make_device("NVIDIA A100", 13000);
    ft_db_kernel k = make_kernel("k1", "t1");
    long long d1 = 0, d2 = 0, kid = 0;
    ft_db_miss m;
    ft_db_result r;
    ft_db *db = NULL, *ro = NULL;
    misses got;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &h200, &d1, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &other, &d2, &err), &err);

    m = make_miss(d1, "f16", 128, 1, 2, 16, 3000, "nearest"); /* seqlen 4096, b*h 32 */
    ASSERT_OK(ft__db_record_miss(db, &m, &err), &err);
    m = make_miss(d1, "f16", 128, 1, 4, 8, 2500, "default"); /* same bucket, another shape */
    ASSERT_OK(ft__db_record_miss(db, &m, &err), &err);
    m = make_miss(d1, "bf16", 64, 0, 1, 1, 100, "default");
    ASSERT_OK(ft__db_record_miss(db, &m, &err), &err);
    m = make_miss(d2, "f16", 64, 0, 2, 16, 1024, "nearest");
    ASSERT_OK(ft__db_record_miss(db, &m, &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM misses"), 3);

    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(db, NULL, -1, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 3);
    /* by device name: A100 first; then bf16 before f16 */
    ASSERT_STREQ(got.m[0].device.name, "NVIDIA A100");
    ASSERT_STREQ(got.m[1].key.dtype, "bf16");
    ASSERT_EQ(ft__key_get(&got.m[1].key, "seqlen", 0), 128);
    ASSERT_EQ(ft__key_get(&got.m[1].key, "bh", 0), 1);
    ASSERT_STREQ(got.m[2].key.dtype, "f16");
    ASSERT_EQ(ft__key_get(&got.m[2].key, "d", 0), 128);
    ASSERT_EQ(ft__key_get(&got.m[2].key, "causal", 0), 1);
    ASSERT_EQ(ft__key_get(&got.m[2].key, "seqlen", 0), 4096);
    ASSERT_EQ(ft__key_get(&got.m[2].key, "bh", 0), 32);
    ASSERT_EQ(got.m[2].count, 2);
    ASSERT_EQ(got.m[2].batch, 2); /* the first shape */
    ASSERT_EQ(got.m[2].heads_q, 16);
    ASSERT_EQ(got.m[2].seqlen_q, 3000);
    ASSERT_STREQ(got.m[2].fallback, "default"); /* the latest */
    ASSERT_EQ(got.m[2].device.driver_version, 13000);
    ASSERT_EQ(got.m[2].tuned, 0);
    ASSERT_TRUE(strlen(got.m[2].first_seen) == 19 && strcmp(got.m[2].first_seen, got.m[2].last_seen) <= 0);

    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(db, "h200", -1, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 2);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(db, NULL, d2, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 1);
    ASSERT_EQ(got.m[0].device_id, d2);

    /* A winner for the d=64 bucket of the A100 makes that miss tuned. */
    ASSERT_OK(ft__db_kernel_id(db, &k, &kid, &err), &err);
    r = make_result(d2, kid, "f16", 64, 0, 1024, FT_RESULT_OK, 2.0);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(db, NULL, d2, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 1);
    ASSERT_EQ(got.m[0].tuned, 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_misses WHERE tuned = 1"), 1);

    /* A read-only handle lists, but does not record. */
    ASSERT_OK(ft__db_open(path, 1, &ro, &err), &err);
    memset(&got, 0, sizeof got);
    ASSERT_OK(ft__db_misses(ro, NULL, -1, collect, &got, &err), &err);
    ASSERT_EQ(got.n, 3);
    ASSERT_EQ(ft__db_record_miss(ro, &m, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "writable");
    ft__db_close(ro);

    /* A miss of a device that is not in the file is refused (foreign key). */
    m = make_miss(12345, "f16", 64, 0, 2, 16, 1024, "nearest");
    ASSERT_EQ(ft__db_record_miss(db, &m, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_EQ(ft__db_misses(NULL, NULL, -1, collect, &got, &err), FT_ERR_INVALID_ARGUMENT);
    ft__db_close(db);
    remove_dir(dir);
}

FT_TEST_MAIN(FT_CASE(test_v1_read_only), FT_CASE(test_v1_migration), FT_CASE(test_record_and_list))
