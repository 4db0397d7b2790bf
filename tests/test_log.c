/* The library's diagnostic lines (common/log.h, ft_set_log_handler): to a handler at every level,
 * whatever FLASHTUNE_DEBUG says; without one to stderr, the debug lines only while it is on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "ft_test.h"

struct seen {
    int n, level;
    char line[2048];
};

static void collect(void *user, int level, const char *line)
{
    struct seen *s = user;
    s->n++;
    s->level = level;
    snprintf(s->line, sizeof s->line, "%s", line);
}

/* What ft__log(level, "%s", text) writes to stderr (fd 2 into a file for the call). */
static void stderr_of(int level, const char *text, char *out, size_t cap)
{
    char path[] = "/tmp/ft-log-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    FILE *f;
    size_t n;

    out[0] = '\0';
    if (fd < 0 || saved < 0)
        return;
    fflush(stderr);
    dup2(fd, 2);
    ft__log(level, "%s", text);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    f = fopen(path, "r");
    n = f != NULL ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f != NULL)
        fclose(f);
    unlink(path);
}

static void test_handler(void)
{
    struct seen s;
    char big[3000];

    memset(&s, 0, sizeof s);
    unsetenv("FLASHTUNE_DEBUG");
    ft_set_log_handler(collect, &s);
    ft__log(FT_LOG_DEBUG, "fwd %s: %d", "key", 7);
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.level, FT_LOG_DEBUG);
    ASSERT_STREQ(s.line, "fwd key: 7");
    ft__log(FT_LOG_WARNING, "misses: %s", "gone");
    ASSERT_EQ(s.n, 2);
    ASSERT_EQ(s.level, FT_LOG_WARNING);
    ASSERT_STREQ(s.line, "misses: gone");
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ft__log(FT_LOG_DEBUG, "%s", big);
    ASSERT_EQ((int)strlen(s.line), 1023);
    ft_set_log_handler(NULL, NULL);
    ft__log(FT_LOG_DEBUG, "after"); /* FLASHTUNE_DEBUG unset: nowhere */
    ASSERT_EQ(s.n, 3);
}

static void test_stderr(void)
{
    char out[256];

    ft_set_log_handler(NULL, NULL);
    unsetenv("FLASHTUNE_DEBUG");
    stderr_of(FT_LOG_DEBUG, "quiet", out, sizeof out);
    ASSERT_STREQ(out, "");
    stderr_of(FT_LOG_WARNING, "loud", out, sizeof out);
    ASSERT_STREQ(out, "flashtune: loud\n");
    setenv("FLASHTUNE_DEBUG", "0", 1);
    stderr_of(FT_LOG_DEBUG, "still quiet", out, sizeof out);
    ASSERT_STREQ(out, "");
    setenv("FLASHTUNE_DEBUG", "1", 1);
    stderr_of(FT_LOG_DEBUG, "a choice", out, sizeof out);
    ASSERT_STREQ(out, "flashtune: a choice\n");
    unsetenv("FLASHTUNE_DEBUG");
}

FT_TEST_MAIN(FT_CASE(test_handler), FT_CASE(test_stderr))
