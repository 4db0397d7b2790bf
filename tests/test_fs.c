/* Tests of the file layer (common/fs.c): what it refuses to read or replace, and that a
 * refused or failed write leaves everything at the path as it was. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "ft_test.h"

static char dir[256];

static void make_dir(void)
{
    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "%s/test-fs-XXXXXX", FT_BINARY_DIR);
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            exit(1);
        }
    }
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static int content_is(const char *path, const char *want)
{
    char *data = NULL;
    size_t size = 0;
    int same;
    if (ft__read_file(path, &data, &size, NULL) != FT_OK)
        return 0;
    same = size == strlen(want) && memcmp(data, want, size) == 0;
    free(data);
    return same;
}

static void test_read_refuses_directory(void)
{
    char *data = (char *)1;
    size_t size = 7;
    ft_err err;

    make_dir();
    ASSERT_EQ(ft__read_file(dir, &data, &size, &err), FT_ERR_IO);
    ASSERT_TRUE(data == NULL);
    ASSERT_EQ(size, 0);
    ASSERT_CONTAINS(err.msg, "a directory, not a regular file");
}

static void test_read_refuses_fifo_without_blocking(void)
{
    char path[512], *data = NULL;
    size_t size;
    ft_err err;

    make_dir();
    snprintf(path, sizeof path, "%s/fifo", dir);
    unlink(path);
    ASSERT_EQ(mkfifo(path, 0600), 0);
    alarm(10); /* a blocking open would end the test here instead of hanging it */
    ASSERT_EQ(ft__read_file(path, &data, &size, &err), FT_ERR_IO);
    alarm(0);
    ASSERT_CONTAINS(err.msg, "a FIFO, not a regular file");
    ASSERT_EQ(ft__path_kind(path, &err), -1);
    ASSERT_EQ(ft__path_kind("/dev/null", &err), -1);
    ASSERT_CONTAINS(err.msg, "a character device");
}

static void test_read_limit_checked_before_reading(void)
{
    char path[512], *data = NULL;
    size_t size = 0, got = 0, file_size = 0;
    char head[4];
    ft_err err;
    int fd;

    make_dir();
    snprintf(path, sizeof path, "%s/sparse", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd >= 0);
    /* 2 GiB, sparse: reading it whole would take 2 GiB of memory. */
    ASSERT_EQ(ftruncate(fd, (off_t)2 << 30), 0);
    close(fd);
    ASSERT_EQ(ft__read_file(path, &data, &size, &err), FT_ERR_IO);
    ASSERT_CONTAINS(err.msg, "2147483648 bytes, more than the 1073741824");
    ASSERT_EQ(ft__read_file_max(path, 100, &data, &size, &err), FT_ERR_IO);
    ASSERT_OK(ft__read_file_head(path, head, sizeof head, &got, &file_size, &err), &err);
    ASSERT_EQ(got, 4);
    ASSERT_EQ(file_size, (size_t)2 << 30);
    unlink(path);
    put(path, "abc");
    ASSERT_OK(ft__read_file_max(path, 3, &data, &size, &err), &err);
    ASSERT_EQ(size, 3);
    ASSERT_STREQ(data, "abc");
    free(data);
    ASSERT_EQ(ft__read_file_max(path, 2, &data, &size, &err), FT_ERR_IO);
}

static void test_write_refuses_what_is_not_a_file(void)
{
    char path[512], sub[512];
    ft_err err;

    make_dir();
    /* A FIFO and a directory stay what they are. */
    snprintf(path, sizeof path, "%s/fifo2", dir);
    unlink(path);
    ASSERT_EQ(mkfifo(path, 0600), 0);
    ASSERT_EQ(ft__write_file_atomic(path, "x", 1, 0, &err), FT_ERR_IO);
    ASSERT_CONTAINS(err.msg, "a FIFO, not a regular file; not replaced");
    ASSERT_EQ(ft__path_kind(path, NULL), -1);
    snprintf(sub, sizeof sub, "%s/subdir", dir);
    mkdir(sub, 0755);
    ASSERT_EQ(ft__write_file_atomic(sub, "x", 1, 0, &err), FT_ERR_IO);
    ASSERT_CONTAINS(err.msg, "a directory");
    /* Missing parents are not created. */
    snprintf(path, sizeof path, "%s/no/such/dir/file", dir);
    ASSERT_EQ(ft__write_file_atomic(path, "x", 1, 0, &err), FT_ERR_IO);
    snprintf(sub, sizeof sub, "%s/no", dir);
    ASSERT_EQ(access(sub, F_OK), -1);
    ASSERT_EQ(ft__write_file_atomic("", "x", 1, 0, &err), FT_ERR_INVALID_ARGUMENT);
}

static void test_write_follows_link_to_file_and_keeps_it(void)
{
    char real[512], link[512], dangling[512];
    struct stat st;
    ft_err err;

    make_dir();
    snprintf(real, sizeof real, "%s/real", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(dangling, sizeof dangling, "%s/dangling", dir);
    put(real, "old");
    unlink(link);
    ASSERT_EQ(symlink(real, link), 0);
    ASSERT_OK(ft__write_file_atomic(link, "new", 3, FT_WRITE_DURABLE, &err), &err);
    ASSERT_EQ(lstat(link, &st), 0);
    ASSERT_TRUE(S_ISLNK(st.st_mode));
    ASSERT_TRUE(content_is(real, "new"));
    unlink(dangling);
    ASSERT_EQ(symlink("/nonexistent-target-of-a-test", dangling), 0);
    ASSERT_EQ(ft__write_file_atomic(dangling, "x", 1, 0, &err), FT_ERR_IO);
    ASSERT_CONTAINS(err.msg, "a symbolic link to nothing");
    ASSERT_EQ(access("/nonexistent-target-of-a-test", F_OK), -1);
}

static void test_write_never_follows_planted_temporaries(void)
{
    char path[512], victim[512], plant[700];
    ft_err err;
    int i;

    make_dir();
    snprintf(path, sizeof path, "%s/target", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    put(victim, "precious");
    /* Links planted at the temporary names this process would pick first, in the old and
     * in the current naming, all pointing at the victim. */
    for (i = 0; i < 8; i++) {
        snprintf(plant, sizeof plant, "%s.tmp.%ld.%d", path, (long)getpid(), i);
        unlink(plant);
        ASSERT_EQ(symlink(victim, plant), 0);
        snprintf(plant, sizeof plant, "%s/.target.tmp.%ld.%d", dir, (long)getpid(), i);
        unlink(plant);
        ASSERT_EQ(symlink(victim, plant), 0);
    }
    ASSERT_OK(ft__write_file_atomic(path, "data", 4, 0, &err), &err);
    ASSERT_TRUE(content_is(path, "data"));
    ASSERT_TRUE(content_is(victim, "precious"));
}

static void test_write_keeps_mode_of_replaced_file(void)
{
    char path[512];
    struct stat st;
    ft_err err;

    make_dir();
    snprintf(path, sizeof path, "%s/private", dir);
    put(path, "a");
    ASSERT_EQ(chmod(path, 0600), 0);
    ASSERT_OK(ft__write_file_atomic(path, "b", 1, 0, &err), &err);
    ASSERT_EQ(stat(path, &st), 0);
    ASSERT_EQ(st.st_mode & 0777, 0600);
    ASSERT_TRUE(content_is(path, "b"));
}

FT_TEST_MAIN(FT_CASE(test_read_refuses_directory), FT_CASE(test_read_refuses_fifo_without_blocking),
             FT_CASE(test_read_limit_checked_before_reading),
             FT_CASE(test_write_refuses_what_is_not_a_file),
             FT_CASE(test_write_follows_link_to_file_and_keeps_it),
             FT_CASE(test_write_never_follows_planted_temporaries),
             FT_CASE(test_write_keeps_mode_of_replaced_file))
