/* A database written by flashtune 0.1 (schema 2, tests/fixtures/tuning-v2.db: a tune of both
 * forward families with the stand-in worker, and two recorded misses) read as it is by a
 * read-only handle and migrated in place to the current schema: every result and miss kept
 * with its id, and every bucket's winner the same kernel with the same cubin before and after,
 * as the runtime library reads them. And a schema-3 file of decode, grouped-query and prefill
 * shapes: its forward keys become those of the shapes (group and sq), read-only or migrated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "db_fixture.h"
#include "ft_test.h"
#include "ops/op.h"

typedef struct choice {
    ft_key key;
    long long kernel_id;
    char variant[512];
    double median_ms;
    uint8_t cubin_sha[32];
    size_t cubin_size;
} choice;

typedef struct buckets {
    int n;
    ft_key b[64];
} buckets;

static int collect_bucket(void *ud, const ft_db_row *row)
{
    buckets *c = ud;
    if (c->n < 64)
        c->b[c->n++] = row->result.key;
    return 0;
}

/* The winner of every bucket with a winner, as ft_context_create's handle reads it. */
static int read_choices(const char *path, choice *out, int cap, long long *device_id)
{
    ft_db *db = NULL;
    ft_db_filter f;
    buckets all;
    ft_err err;
    int i, n = 0;

    memset(&all, 0, sizeof all);
    if (ft__db_open(path, 1, &db, &err) != FT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    ft__db_filter_init(&f);
    f.winners_only = 1;
    if (ft__db_query(db, &f, collect_bucket, &all, &err) != FT_OK)
        goto fail;
    *device_id = 1;
    for (i = 0; i < all.n && n < cap; i++) {
        ft_db_row row;
        void *cubin = NULL;
        size_t size = 0;
        int found = 0;
        if (ft__db_winner(db, *device_id, &all.b[i], &row, &cubin, &size, &found, &err) != FT_OK || !found)
            goto fail;
        out[n].key = all.b[i];
        out[n].kernel_id = row.result.kernel_id;
        snprintf(out[n].variant, sizeof out[n].variant, "%s", row.variant);
        out[n].median_ms = row.result.median_ms;
        ft__sha256(cubin, size, out[n].cubin_sha);
        out[n].cubin_size = size;
        free(cubin);
        n++;
    }
    ft__db_close(db);
    return n;
fail:
    fprintf(stderr, "%s\n", err.msg);
    ft__db_close(db);
    return -1;
}

static void test_fixture_is_schema_2(void)
{
    ASSERT_EQ(raw_int(FT_FIXTURE_V2, "PRAGMA user_version"), 2);
    ASSERT_EQ(raw_int(FT_FIXTURE_V2, "SELECT count(*) FROM results"), 228);
    ASSERT_EQ(raw_int(FT_FIXTURE_V2, "SELECT count(*) FROM misses"), 2);
    ASSERT_EQ(raw_int(FT_FIXTURE_V2, "SELECT count(DISTINCT family) FROM kernels"), 2);
}

static void test_read_only_then_migrated_same_winners(void)
{
    static choice before[64], after[64];
    char dir[64], path[128], key[FT_KEY_TEXT_MAX];
    long long dev = 0;
    uint8_t sum_before[32], sum_after[32];
    char *data = NULL;
    size_t size = 0;
    ft_db *db = NULL;
    ft_err err;
    int n, m, i;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/old.db", dir);
    ASSERT_TRUE(copy_file(FT_FIXTURE_V2, path));
    ASSERT_OK(ft__read_file(path, &data, &size, &err), &err);
    ft__sha256(data, size, sum_before);
    free(data);

    /* The runtime's read-only handle reads schema 2 as it is and leaves the file alone. */
    n = read_choices(path, before, 64, &dev);
    ASSERT_EQ(n, 24);
    ASSERT_OK(ft__read_file(path, &data, &size, &err), &err);
    ft__sha256(data, size, sum_after);
    free(data);
    ASSERT_TRUE(memcmp(sum_before, sum_after, 32) == 0);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 2);

    /* A writable open migrates it in place. */
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 228);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results WHERE op = 'fwd'"), 228);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM misses"), 2);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'results' AND sql LIKE '%seqlen_bucket%'"), 0);
    /* every row keeps its id and what it measured */
    ASSERT_EQ(raw_int(path, "SELECT sum(id) FROM results"), raw_int(FT_FIXTURE_V2, "SELECT sum(id) FROM results"));
    ASSERT_EQ(raw_int(path, "SELECT sum(repetitions) FROM results"),
              raw_int(FT_FIXTURE_V2, "SELECT sum(repetitions) FROM results"));
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_results v JOIN results r ON r.id = v.result_id"), 228);
    /* the view still shows the old columns, taken from the key */
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_winners WHERE dtype = 'f16' AND head_dim = 64 AND causal = 1"), 6);
    /* the key is the operation's canonical text */
    {
        ft_key b;
        char text[256];
        fwd_key("bf16", 128, 1, 1, 16, 16384, 16384, &b);
        ft__key_format(&b, key, sizeof key);
        snprintf(text, sizeof text, "SELECT count(*) FROM results WHERE key = '%s'", key);
        ASSERT_EQ(raw_int(path, text), raw_int(FT_FIXTURE_V2, "SELECT count(*) FROM results WHERE dtype = 'bf16' "
                                                              "AND head_dim = 128 AND causal = 1 AND seqlen_bucket = 16384 AND bh_bucket = 16"));
    }
    m = read_choices(path, after, 64, &dev);
    ASSERT_EQ(m, n);
    for (i = 0; i < n; i++) {
        ASSERT_TRUE(ft__key_equal(&before[i].key, &after[i].key));
        ASSERT_EQ(before[i].kernel_id, after[i].kernel_id);
        ASSERT_STREQ(before[i].variant, after[i].variant);
        ASSERT_TRUE(before[i].median_ms == after[i].median_ms);
        ASSERT_EQ(before[i].cubin_size, after[i].cubin_size);
        ASSERT_TRUE(before[i].cubin_size > 0);
        ASSERT_TRUE(memcmp(before[i].cubin_sha, after[i].cubin_sha, 32) == 0);
    }
    remove_dir(dir);
}

typedef struct miss_list {
    int n;
    ft_db_miss m[8];
} miss_list;

static int collect_miss(void *ud, const ft_db_miss *m)
{
    miss_list *c = ud;
    if (c->n < 8)
        c->m[c->n] = *m;
    c->n++;
    return 0;
}

static void test_misses_kept(void)
{
    char dir[64], path[128];
    miss_list ro, rw;
    ft_db *db = NULL;
    ft_err err;
    int i;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/old.db", dir);
    ASSERT_TRUE(copy_file(FT_FIXTURE_V2, path));
    memset(&ro, 0, sizeof ro);
    memset(&rw, 0, sizeof rw);
    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ASSERT_OK(ft__db_misses(db, NULL, -1, collect_miss, &ro, &err), &err);
    ft__db_close(db);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_misses(db, NULL, -1, collect_miss, &rw, &err), &err);
    ft__db_close(db);
    ASSERT_EQ(ro.n, 2);
    ASSERT_EQ(rw.n, 2);
    for (i = 0; i < 2; i++) {
        ASSERT_TRUE(ft__key_equal(&ro.m[i].key, &rw.m[i].key));
        ASSERT_EQ(ro.m[i].count, rw.m[i].count);
        ASSERT_EQ(ro.m[i].seqlen_q, rw.m[i].seqlen_q);
        ASSERT_STREQ(ro.m[i].fallback, rw.m[i].fallback);
        ASSERT_STREQ(ro.m[i].first_seen, rw.m[i].first_seen);
        ASSERT_EQ(ro.m[i].tuned, rw.m[i].tuned);
    }
    /* bf16 d=96 was never tuned; f16 d=64 causal 2048 has a winner */
    ASSERT_STREQ(rw.m[0].key.dtype, "bf16");
    ASSERT_EQ(rw.m[0].tuned, 0);
    ASSERT_EQ(ft__key_get(&rw.m[1].key, "seqlen", 0), 2048);
    ASSERT_EQ(rw.m[1].count, 3);
    remove_dir(dir);
}

/* ---- schema 3: the forward's key without group and sq ------------------------------------- */

typedef struct shape {
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k;
} shape;

/* A decode step of a grouped-query model, a grouped-query prefill, and a prefill of as many K/V
 * heads as query heads: each of its own key in schema 3, and of another group or query length. */
static const shape v3_shapes[3] = {{8, 32, 8, 1, 8192}, {2, 32, 4, 2048, 2048}, {1, 16, 16, 8192, 8192}};

static void shape_key(const shape *s, ft_key *out)
{
    ft__key_of(&ft__op_fwd, "bf16", 128, 0, 0, s->batch, s->heads_q, s->heads_kv, s->seqlen_q, s->seqlen_k, out);
}

/* The key of schema 3 (no group, no sq) from a key text's fields, in SQL. */
/* SQL that takes a file of schema 5 back to schema 4's tables (the views go; migrating makes them
 * again): no preferred column, no triggers that clear it. */
#define SCHEMA_4_OF_5                                                                             \
    "DROP VIEW v_misses; DROP VIEW v_devices; DROP VIEW v_winners; DROP VIEW v_results;\n"       \
    "DROP VIEW v_results_base; DROP TRIGGER results_measured; DROP TRIGGER results_remeasured;\n" \
    "ALTER TABLE results DROP COLUMN preferred;\n"

#define V3_KEY(col)                                                                                    \
    "json_object('dtype', json_extract(" col ", '$.dtype'), 'd', json_extract(" col ", '$.d'), "        \
    "'causal', json_extract(" col ", '$.causal'), 'seqlen', json_extract(" col ", '$.seqlen'), 'bh', " \
    "json_extract(" col ", '$.bh'))"

/* A schema-3 file at path: two kernels' results for each shape (kernel 1 the faster), the
 * misses of the shapes (counted 1, 2, 3 times), and a result whose key is not its shape's (as
 * anything may have written it): the keys written back in the form of schema 3. *kernels gets
 * the two kernels' ids. */
static void make_v3(const char *path, long long *kernels)
{
    ft_db_device dev = make_device("H200 stand-in", 13000);
    ft_db_kernel k[2];
    ft_db *db = NULL;
    long long dev_id = 0;
    ft_err err;
    char sql[1024];
    int i, j, n;

    k[0] = make_kernel("d=128,bm=128,bn=64,warps=8", "t");
    k[1] = make_kernel("d=128,bm=64,bn=64,warps=4", "t");
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &dev_id, &err), &err);
    for (j = 0; j < 2; j++)
        ASSERT_OK(ft__db_kernel_id(db, &k[j], &kernels[j], &err), &err);
    for (i = 0; i < 3; i++) {
        const shape *s = &v3_shapes[i];
        ft_db_miss m;
        for (j = 0; j < 2; j++) {
            ft_db_result r = make_result(dev_id, kernels[j], "bf16", 128, 0, 1024, FT_RESULT_OK, 2.0 - j + i);
            r.batch = s->batch, r.heads_q = s->heads_q, r.heads_kv = s->heads_kv;
            r.seqlen_q = s->seqlen_q, r.seqlen_k = s->seqlen_k;
            shape_key(s, &r.key);
            ASSERT_OK(ft__db_record(db, &r, &err), &err);
        }
        memset(&m, 0, sizeof m);
        m.device_id = dev_id;
        shape_key(s, &m.key);
        m.batch = s->batch, m.heads_q = s->heads_q, m.heads_kv = s->heads_kv;
        m.seqlen_q = s->seqlen_q, m.seqlen_k = s->seqlen_k;
        snprintf(m.fallback, sizeof m.fallback, "default");
        for (n = 0; n <= i; n++)
            ASSERT_OK(ft__db_record_miss(db, &m, &err), &err);
    }
    ft__db_close(db);
    ASSERT_EQ(raw_exec(path, SCHEMA_4_OF_5 "UPDATE results SET key = " V3_KEY("key") ";\n"
                             "UPDATE misses SET key = " V3_KEY("key") ";\n"
                             "PRAGMA user_version = 3;"),
              SQLITE_OK);
    /* A row whose key says seqlen 16384 of a shape of 8192 (the prefill's, whose own key kernel 1
     * has for it): computed from the shape alone, the two would become one key. */
    snprintf(sql, sizeof sql,
             "INSERT INTO results (device_id, kernel_id, op, key, batch, heads_q, heads_kv, seqlen_q, seqlen_k, status, "
             "reason, driver_version, nvrtc_version, template_hash) VALUES (%lld, %lld, 'fwd', "
             "'{\"dtype\":\"bf16\",\"d\":128,\"causal\":0,\"seqlen\":16384,\"bh\":16}', 1, 16, 16, 8192, 8192, "
             "'wrong_result', 'odd', 13000, '13.0', 't')",
             dev_id, kernels[1]);
    ASSERT_EQ(raw_exec(path, sql), SQLITE_OK);
}

typedef struct listing {
    int n;
    long long kernel_id[16];
    int seqlen_q[16], winner[16];
    double median_ms[16];
    ft_key key[16];
} listing;

static int collect_result(void *ud, const ft_db_row *row)
{
    listing *l = ud;
    if (l->n < 16) {
        l->seqlen_q[l->n] = row->result.seqlen_q;
        l->median_ms[l->n] = row->result.median_ms;
        l->kernel_id[l->n] = row->result.kernel_id;
        l->winner[l->n] = row->winner;
        l->key[l->n] = row->result.key;
    }
    l->n++;
    return 0;
}

/* Every result, the winner of each shape's key, and the misses, as a handle on path reads them. */
static void read_v3(const char *path, int read_only, const long long *kernels, listing *all, miss_list *misses)
{
    ft_db *db = NULL;
    ft_db_filter f;
    ft_err err;
    int i;

    memset(all, 0, sizeof *all);
    memset(misses, 0, sizeof *misses);
    ASSERT_OK(ft__db_open(path, read_only, &db, &err), &err);
    ft__db_filter_init(&f);
    f.winners_only = 0;
    ASSERT_OK(ft__db_query(db, &f, collect_result, all, &err), &err);
    ASSERT_OK(ft__db_misses(db, NULL, -1, collect_miss, misses, &err), &err);
    for (i = 0; i < 3; i++) {
        ft_db_row row;
        ft_key want;
        int found = 0;
        shape_key(&v3_shapes[i], &want);
        ASSERT_OK(ft__db_winner(db, 1, &want, &row, NULL, NULL, &found, &err), &err);
        ASSERT_TRUE(found);
        ASSERT_EQ(row.result.kernel_id, kernels[1]);
        ASSERT_EQ(row.result.seqlen_q, v3_shapes[i].seqlen_q);
        ASSERT_EQ(row.result.heads_kv, v3_shapes[i].heads_kv);
    }
    ft__db_close(db);
}

static void test_schema_3_keys_from_shapes(void)
{
    static listing ro, rw;
    static miss_list ro_m, rw_m;
    char dir[64], path[128], copy[128], sql[512], text[FT_KEY_TEXT_MAX];
    long long kernels[2], ids, miss_ids, counts;
    int i;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/v3.db", dir);
    snprintf(copy, sizeof copy, "%s/v3-ro.db", dir);
    make_v3(path, kernels);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 3);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results WHERE key LIKE '%\"sq\"%' OR key LIKE '%\"group\"%'"), 0);
    ASSERT_TRUE(copy_file(path, copy));
    ids = raw_int(path, "SELECT sum(id) FROM results");
    miss_ids = raw_int(path, "SELECT sum(id * count) FROM misses");
    counts = raw_int(path, "SELECT sum(count) FROM misses");

    /* Read-only: the file stays of schema 3, its keys read in the new form. */
    read_v3(copy, 1, kernels, &ro, &ro_m);
    ASSERT_EQ(raw_int(copy, "PRAGMA user_version"), 3);
    /* Migrated: every row keeps its id and count, its key the one of its shape. */
    read_v3(path, 0, kernels, &rw, &rw_m);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 7);
    ASSERT_EQ(raw_int(path, "SELECT count(DISTINCT key) FROM results"), 4);
    ASSERT_EQ(raw_int(path, "SELECT sum(id) FROM results"), ids);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM misses"), 3);
    ASSERT_EQ(raw_int(path, "SELECT sum(id * count) FROM misses"), miss_ids);
    ASSERT_EQ(raw_int(path, "SELECT sum(count) FROM misses"), counts);
    for (i = 0; i < 3; i++) {
        ft_key want;
        shape_key(&v3_shapes[i], &want);
        ft__key_format(&want, text, sizeof text);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM results WHERE op = 'fwd' AND key = '%s'", text);
        ASSERT_EQ(raw_int(path, sql), 2);
        snprintf(sql, sizeof sql, "SELECT count FROM misses WHERE key = '%s'", text);
        ASSERT_EQ(raw_int(path, sql), i + 1);
        snprintf(sql, sizeof sql, "SELECT kernel_id FROM v_winners WHERE key = '%s'", text);
        ASSERT_EQ(raw_int(path, sql), kernels[1]);
    }
    ASSERT_STREQ(text, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":0,\"group\":1,\"sq\":8192,\"seqlen\":8192,\"bh\":16}");
    /* the row whose key was not its shape's keeps its own buckets, and gets group and sq */
    raw_text(path, "SELECT key FROM results WHERE reason = 'odd'", text, sizeof text);
    ASSERT_STREQ(text, "{\"dtype\":\"bf16\",\"d\":128,\"causal\":0,\"group\":1,\"sq\":8192,\"seqlen\":16384,\"bh\":16}");
    /* the views' columns of the new fields: the decode step's group is 32 / 8 */
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_winners WHERE sq_bucket = 1 AND group_bucket = 4 "
                            "AND seqlen_bucket = 8192 AND bh_bucket = 256"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_winners WHERE sq_bucket = 2048 AND group_bucket = 8"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_misses WHERE sq_bucket <= 16"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM v_results WHERE group_bucket IS NULL OR sq_bucket IS NULL"), 0);
    /* The read-only handle on the copy saw what the migrated file holds. */
    ASSERT_EQ(ro.n, 7);
    ASSERT_EQ(rw.n, 7);
    for (i = 0; i < 7; i++) {
        ASSERT_EQ(ro.seqlen_q[i], rw.seqlen_q[i]);
        ASSERT_TRUE(ro.median_ms[i] == rw.median_ms[i] || (isnan(ro.median_ms[i]) && isnan(rw.median_ms[i])));
        ASSERT_EQ(ro.kernel_id[i], rw.kernel_id[i]);
        ASSERT_EQ(ro.winner[i], rw.winner[i]);
        ASSERT_TRUE(ft__key_equal(&ro.key[i], &rw.key[i]));
    }
    ASSERT_EQ(ro_m.n, 3);
    ASSERT_EQ(rw_m.n, 3);
    for (i = 0; i < 3; i++) {
        ASSERT_TRUE(ft__key_equal(&ro_m.m[i].key, &rw_m.m[i].key));
        ASSERT_EQ(ro_m.m[i].count, rw_m.m[i].count);
    }
    remove_dir(dir);
}

/* A schema-4 file (schema 5 less the decisions): read as it is by a read-only handle, migrated
 * by a writable one with every row and winner kept; then a decision takes, and measuring undoes
 * it. */
static void test_schema_4_decisions(void)
{
    char dir[64], path[128];
    ft_db_device dev = make_device("H200 stand-in", 13000);
    ft_db_kernel k[2];
    long long d = 0, ids[2];
    ft_db_result r;
    ft_db_row row;
    ft_db *db = NULL;
    int found = -1, i;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/v4.db", dir);
    k[0] = make_kernel("d=128,bm=128,bn=64,warps=8", "t");
    k[1] = make_kernel("d=128,bm=64,bn=64,warps=4", "t");
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_OK(ft__db_device_id(db, &dev, &d, &err), &err);
    for (i = 0; i < 2; i++) {
        ASSERT_OK(ft__db_kernel_id(db, &k[i], &ids[i], &err), &err);
        r = make_result(d, ids[i], "bf16", 128, 0, 4096, FT_RESULT_OK, 1.0 + 0.01 * i);
        ASSERT_OK(ft__db_record(db, &r, &err), &err);
    }
    ft__db_close(db);
    ASSERT_EQ(raw_exec(path, SCHEMA_4_OF_5 "PRAGMA user_version = 4;"), SQLITE_OK);

    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ASSERT_OK(ft__db_winner(db, d, &r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ASSERT_EQ(row.result.kernel_id, ids[0]);
    ASSERT_EQ(row.preferred, 0);
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 4);

    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results WHERE preferred = 0"), 2);
    ASSERT_EQ(raw_int(path, "SELECT kernel_id FROM v_winners"), ids[0]);
    ASSERT_OK(ft__db_decide(db, d, &r.key, ids[1], &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT kernel_id FROM v_winners"), ids[1]);
    r = make_result(d, ids[0], "bf16", 128, 0, 4096, FT_RESULT_OK, 0.99);
    ASSERT_OK(ft__db_record(db, &r, &err), &err);
    ASSERT_EQ(raw_int(path, "SELECT kernel_id FROM v_winners"), ids[0]);
    ft__db_close(db);
    remove_dir(dir);
}

FT_TEST_MAIN(FT_CASE(test_fixture_is_schema_2), FT_CASE(test_read_only_then_migrated_same_winners),
             FT_CASE(test_misses_kept), FT_CASE(test_schema_3_keys_from_shapes),
             FT_CASE(test_schema_4_decisions))
