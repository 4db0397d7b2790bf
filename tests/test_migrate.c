/* A database written by flashtune 0.1 (schema 2, tests/fixtures/tuning-v2.db: a tune of both
 * forward families with the stand-in worker, and two recorded misses) read as it is by a
 * read-only handle and migrated in place to schema 3: every result and miss kept with its id,
 * and every bucket's winner the same kernel with the same cubin before and after, as the
 * runtime library reads them. */
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
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 3);
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

FT_TEST_MAIN(FT_CASE(test_fixture_is_schema_2), FT_CASE(test_read_only_then_migrated_same_winners),
             FT_CASE(test_misses_kept))
