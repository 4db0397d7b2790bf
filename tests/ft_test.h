/* A small test harness: typed asserts that print both sides and the location, and a
 * runner that executes each test case and counts failures. A failed assert ends the case. */
#ifndef FT_TEST_H
#define FT_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int ft_test_failed_;

#define FT_FAIL_(...)                                                   \
    do {                                                                \
        fprintf(stderr, "%s:%d: FAILED: ", __FILE__, __LINE__);         \
        fprintf(stderr, __VA_ARGS__);                                   \
        fputc('\n', stderr);                                            \
        ft_test_failed_ = 1;                                            \
        return;                                                         \
    } while (0)

#define ASSERT_TRUE(c)                                                  \
    do {                                                                \
        if (!(c))                                                       \
            FT_FAIL_("%s", #c);                                         \
    } while (0)

#define ASSERT_EQ(a, b)                                                 \
    do {                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);             \
        if (a_ != b_)                                                   \
            FT_FAIL_("%s == %s (%lld vs %lld)", #a, #b, a_, b_);        \
    } while (0)

#define ASSERT_NE(a, b)                                                 \
    do {                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);             \
        if (a_ == b_)                                                   \
            FT_FAIL_("%s != %s (both %lld)", #a, #b, a_);               \
    } while (0)

#define ASSERT_STREQ(a, b)                                              \
    do {                                                                \
        const char *a_ = (a), *b_ = (b);                                \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)            \
            FT_FAIL_("%s == %s (\"%s\" vs \"%s\")", #a, #b,             \
                     a_ ? a_ : "(null)", b_ ? b_ : "(null)");           \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                    \
    do {                                                                \
        const char *h_ = (hay), *n_ = (needle);                         \
        if (h_ == NULL || strstr(h_, n_) == NULL)                       \
            FT_FAIL_("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_); \
    } while (0)

/* Asserts an ft_status is FT_OK and prints the ft_err message otherwise. */
#define ASSERT_OK(expr, errp)                                           \
    do {                                                                \
        int rc_ = (int)(expr);                                          \
        if (rc_ != 0)                                                   \
            FT_FAIL_("%s returned %d: %s", #expr, rc_, (errp)->msg);    \
    } while (0)

/* How many times needle occurs in hay (overlaps counted). */
static inline int ft_test_count(const char *hay, const char *needle)
{
    int n = 0;
    for (hay = strstr(hay, needle); hay != NULL; hay = strstr(hay + 1, needle))
        n++;
    return n;
}

typedef struct ft_test_case {
    const char *name;
    void (*fn)(void);
} ft_test_case;

#define FT_TEST_MAIN(...)                                                       \
    int ft_test_failed_;                                                        \
    int main(int argc, char **argv)                                             \
    {                                                                           \
        static const ft_test_case cases[] = {__VA_ARGS__};                      \
        int n = (int)(sizeof cases / sizeof cases[0]);                          \
        int failed = 0, ran = 0;                                                \
        for (int i = 0; i < n; i++) {                                           \
            if (argc > 1 && strstr(cases[i].name, argv[1]) == NULL)             \
                continue;                                                       \
            ft_test_failed_ = 0;                                                \
            cases[i].fn();                                                      \
            ran++;                                                              \
            printf("%s %s\n", ft_test_failed_ ? "FAIL" : "ok  ", cases[i].name); \
            failed += ft_test_failed_;                                          \
        }                                                                       \
        printf("%d/%d passed\n", ran - failed, ran);                            \
        return failed ? 1 : (ran ? 0 : 1);                                      \
    }

#define FT_CASE(fn) {#fn, fn}

#endif
