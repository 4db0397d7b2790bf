/* Tests of the compile cache's reading side (runtime/cache.c) without NVRTC: entries whose
 * checksum is right but whose header is not (sizes that overflow, implausible reports), entries
 * that are not files, a cache directory that is a file; what is counted as corrupt and what as
 * removed. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"
#include "ft_test.h"
#include "runtime/compile.h"

#define HEADER 104 /* magic, key, the report, the two sizes (runtime/cache.c) */

static char dir[256];

static void make_dir(void)
{
    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "%s/test-cache-XXXXXX", FT_BINARY_DIR);
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            exit(1);
        }
    }
}

static void key_of(int n, uint8_t key[32])
{
    memset(key, 0, 32);
    key[0] = (uint8_t)n;
    key[31] = 0xa5;
}

/* Stores an entry of a made-up cubin under key n; returns its path in path. */
static int store(ft_cache *c, int n, char *path, size_t cap)
{
    static unsigned char cubin[300];
    ft_compiled in;
    uint8_t key[32];
    ft_err err;

    memset(&in, 0, sizeof in);
    memset(cubin, 0x42, sizeof cubin);
    in.cubin = cubin;
    in.cubin_size = sizeof cubin;
    in.log = "ptxas info: Used 40 registers";
    in.report.registers = 40;
    in.compile_ms = 12.5;
    key_of(n, key);
    ft__cache_path(c, key, path, cap);
    return ft__cache_put(c, key, &in, &err) == FT_OK;
}

/* Rewrites 8 bytes of an entry's header at off and puts a matching checksum after the header,
 * so that only the field itself can give the entry away. */
static int patch(const char *path, size_t off, const void *v, size_t n)
{
    char *data = NULL;
    size_t size = 0;
    ft_sha256 s;
    FILE *f;
    int ok;

    if (ft__read_file(path, &data, &size, NULL) != FT_OK || size < HEADER + 32)
        return 0;
    memcpy(data + off, v, n);
    ft__sha256_init(&s);
    ft__sha256_update(&s, data, HEADER);
    ft__sha256_update(&s, data + HEADER + 32, size - HEADER - 32);
    ft__sha256_final(&s, (uint8_t *)data + HEADER);
    f = fopen(path, "wb");
    ok = f != NULL && fwrite(data, 1, size, f) == size;
    if (f != NULL)
        ok &= fclose(f) == 0;
    free(data);
    return ok;
}

static void test_a_good_entry_hits(void)
{
    ft_cache *c = NULL;
    ft_compiled out;
    char path[4200];
    uint8_t key[32];
    ft_err err;

    make_dir();
    ASSERT_OK(ft__cache_open(dir, &c, &err), &err);
    ASSERT_TRUE(store(c, 1, path, sizeof path));
    key_of(1, key);
    ASSERT_EQ(ft__cache_get(c, key, &out), 1);
    ASSERT_EQ(out.cubin_size, 300);
    ASSERT_EQ(out.report.registers, 40);
    ft__compiled_free(&out);
    ASSERT_EQ(ft__cache_stats(c).corrupt, 0);
    ft__cache_close(c);
}

/* A checksum that matches proves nothing about the header: sizes that overflow or do not add
 * up, and reports no compiler makes, are corrupt entries, removed, never loaded. */
static void test_implausible_headers_are_corrupt(void)
{
    static const struct {
        size_t off;
        int64_t v;
        const char *what;
    } cases[] = {
        {88, -1, "log size 2^64 - 1"},
        {96, -1, "cubin size 2^64 - 1"},
        {88, INT64_MIN, "log size 2^63 (the sum wraps)"},
        {96, 0, "no cubin"},
        {88, 1000, "sizes that do not add up"},
        {48, -7, "negative static shared memory"},
        {64, (int64_t)1 << 40, "2^40 bytes of spills"},
    };
    ft_cache *c = NULL;
    ft_compiled out;
    char path[4200];
    uint8_t key[32];
    ft_err err;
    size_t i;

    make_dir();
    ASSERT_OK(ft__cache_open(dir, &c, &err), &err);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_cache_stats before = ft__cache_stats(c), after;
        ASSERT_TRUE(store(c, 10 + (int)i, path, sizeof path));
        ASSERT_TRUE(patch(path, cases[i].off, &cases[i].v, 8));
        key_of(10 + (int)i, key);
        if (ft__cache_get(c, key, &out) != 0)
            FT_FAIL_("loaded an entry with %s", cases[i].what);
        after = ft__cache_stats(c);
        ASSERT_EQ(after.corrupt, before.corrupt + 1);
        ASSERT_EQ(after.removed, before.removed + 1);
        ASSERT_EQ(access(path, F_OK), -1);
    }
    /* registers (int32 at 40) out of range, a NaN compile time (at 80) */
    {
        int32_t regs = 100000;
        double nan_ms = strtod("nan", NULL);
        ASSERT_TRUE(store(c, 30, path, sizeof path));
        ASSERT_TRUE(patch(path, 40, &regs, 4));
        key_of(30, key);
        ASSERT_EQ(ft__cache_get(c, key, &out), 0);
        ASSERT_TRUE(store(c, 31, path, sizeof path));
        ASSERT_TRUE(patch(path, 80, &nan_ms, 8));
        key_of(31, key);
        ASSERT_EQ(ft__cache_get(c, key, &out), 0);
        ASSERT_EQ(ft__cache_stats(c).corrupt, (long long)(sizeof cases / sizeof cases[0]) + 2);
    }
    ft__cache_close(c);
}

static void on_alarm(int sig)
{
    (void)sig;
    fprintf(stderr, "test_cache: blocked reading a cache entry\n");
    _exit(1);
}

/* An entry path that holds a directory or a FIFO is a miss at once (a FIFO is never opened for
 * reading, which would block); the FIFO is removed, the directory cannot be, and the counts say
 * which. */
static void test_entries_that_are_not_files(void)
{
    ft_cache *c = NULL;
    ft_compiled out;
    char path[4200];
    uint8_t key[32];
    ft_cache_stats s;
    ft_err err;
    struct stat st;

    make_dir();
    ASSERT_OK(ft__cache_open(dir, &c, &err), &err);
    signal(SIGALRM, on_alarm);
    alarm(10);
    ASSERT_TRUE(store(c, 40, path, sizeof path));
    ASSERT_EQ(unlink(path), 0);
    ASSERT_EQ(mkdir(path, 0755), 0);
    key_of(40, key);
    ASSERT_EQ(ft__cache_get(c, key, &out), 0);
    s = ft__cache_stats(c);
    ASSERT_EQ(s.corrupt, 1);
    ASSERT_EQ(s.removed, 0);
    ASSERT_TRUE(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    ASSERT_TRUE(store(c, 41, path, sizeof path));
    ASSERT_EQ(unlink(path), 0);
    ASSERT_EQ(mkfifo(path, 0644), 0);
    key_of(41, key);
    ASSERT_EQ(ft__cache_get(c, key, &out), 0);
    s = ft__cache_stats(c);
    ASSERT_EQ(s.corrupt, 2);
    ASSERT_EQ(s.removed, 1);
    ASSERT_EQ(access(path, F_OK), -1);
    /* a missing entry is a plain miss, neither corrupt nor removed */
    key_of(42, key);
    ASSERT_EQ(ft__cache_get(c, key, &out), 0);
    ASSERT_EQ(ft__cache_stats(c).corrupt, 2);
    alarm(0);
    ft__cache_close(c);
}

/* A cache directory that is a file is an error naming it, and the file is left as it was. */
static void test_cache_dir_that_is_a_file(void)
{
    char path[300];
    ft_cache *c = NULL;
    char *data = NULL;
    size_t size = 0;
    ft_err err;
    FILE *f;

    make_dir();
    snprintf(path, sizeof path, "%s/plain-file", dir);
    f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    fputs("not a cache\n", f);
    fclose(f);
    ASSERT_EQ(ft__cache_open(path, &c, &err), FT_ERR_IO);
    ASSERT_TRUE(c == NULL);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "is not a directory");
    ASSERT_OK(ft__read_file(path, &data, &size, &err), &err);
    ASSERT_STREQ(data, "not a cache\n");
    free(data);
}

/* An entry larger than the reader takes (256 MiB) is not written, so it is never a corrupt
 * entry that every later run recompiles and removes. */
static void test_too_large_is_not_written(void)
{
    const size_t big = ((size_t)256 << 20) + 1;
    ft_cache *c = NULL;
    ft_compiled in;
    char path[4200];
    uint8_t key[32];
    ft_err err;

    make_dir();
    ASSERT_OK(ft__cache_open(dir, &c, &err), &err);
    memset(&in, 0, sizeof in);
    in.cubin = calloc(big, 1); /* never touched: refused before it is read */
    ASSERT_TRUE(in.cubin != NULL);
    in.cubin_size = big;
    in.log = "";
    key_of(50, key);
    ft__cache_path(c, key, path, sizeof path);
    ASSERT_EQ(ft__cache_put(c, key, &in, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "more than 256 MiB");
    ASSERT_EQ(access(path, F_OK), -1);
    ASSERT_EQ(ft__cache_stats(c).stores, 0);
    free(in.cubin);
    ft__cache_close(c);
}

FT_TEST_MAIN(FT_CASE(test_a_good_entry_hits), FT_CASE(test_too_large_is_not_written), FT_CASE(test_implausible_headers_are_corrupt),
             FT_CASE(test_entries_that_are_not_files), FT_CASE(test_cache_dir_that_is_a_file))
