/* Text from outside made printable, and the environment's switches (common/text.h). */
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "ft_test.h"

/* ft__printable of the len bytes at in must be want, and the result its own fixed point. */
static int printable_is(const char *in, size_t len, const char *want)
{
    char out[256];
    char again[256];
    size_t need = ft__printable(out, sizeof out, in, len);

    ft__printable(again, sizeof again, out, strlen(out));
    if (strcmp(out, want) != 0 || need != strlen(want) || strcmp(again, out) != 0) {
        fprintf(stderr, "printable of %zu bytes: \"%s\" (needs %zu), again \"%s\"; want \"%s\"\n",
                len, out, need, again, want);
        return 0;
    }
    /* and ft__is_printable says whether anything had to change */
    return ft__is_printable(out, strlen(out)) &&
           ft__is_printable(in, len) == (len == strlen(want) && memcmp(in, want, len) == 0);
}

#define PRINTABLE_IS(lit, want) ASSERT_TRUE(printable_is(lit, sizeof lit - 1, want))

static void test_control_characters(void)
{
    PRINTABLE_IS("plain text, (punctuation) 123", "plain text, (punctuation) 123");
    PRINTABLE_IS("a\nb\rc\td", "a\\nb\\rc\\td");
    PRINTABLE_IS("\x1b[2J\x1b]0;title\a", "\\x1b[2J\\x1b]0;title\\x07");
    PRINTABLE_IS("nul\0byte", "nul\\x00byte");
    PRINTABLE_IS("del\x7f", "del\\x7f");
    PRINTABLE_IS("\x01\x1f", "\\x01\\x1f");
    /* a backslash stays: text that already holds escapes is left as it is */
    PRINTABLE_IS("back\\slash \\n", "back\\slash \\n");
    PRINTABLE_IS("", "");
}

static void test_utf8(void)
{
    PRINTABLE_IS("caf\xc3\xa9 \xce\xb1\xce\xb2 \xe2\x82\xac \xf0\x9f\x99\x82",
                 "caf\xc3\xa9 \xce\xb1\xce\xb2 \xe2\x82\xac \xf0\x9f\x99\x82");
    /* C1 controls (U+009B is a CSI to some terminals) and bidirectional overrides */
    PRINTABLE_IS("\xc2\x9b" "31m", "\\xc2\\x9b31m");
    PRINTABLE_IS("\xc2\x85", "\\xc2\\x85");
    PRINTABLE_IS("abc\xe2\x80\xae" "fed", "abc\\xe2\\x80\\xaefed");
    PRINTABLE_IS("\xe2\x81\xa6x\xe2\x81\xa9", "\\xe2\\x81\\xa6x\\xe2\\x81\\xa9");
    /* invalid: a lone continuation byte, a truncated sequence, overlong forms, a surrogate,
     * past U+10FFFF */
    PRINTABLE_IS("\x80", "\\x80");
    PRINTABLE_IS("\xc3", "\\xc3");
    PRINTABLE_IS("\xe2\x82", "\\xe2\\x82");
    PRINTABLE_IS("\xc0\xaf", "\\xc0\\xaf");
    PRINTABLE_IS("\xe0\x80\xaf", "\\xe0\\x80\\xaf");
    PRINTABLE_IS("\xed\xa0\x80", "\\xed\\xa0\\x80");
    PRINTABLE_IS("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
    PRINTABLE_IS("\xff\xfe", "\\xff\\xfe");
}

static void test_truncation(void)
{
    char out[8];
    size_t need;

    /* stops before an escape that does not fit, never in the middle of one */
    need = ft__printable(out, sizeof out, "abcdef\n", 7);
    ASSERT_EQ(need, 8);
    ASSERT_STREQ(out, "abcdef");
    need = ft__printable(out, sizeof out, "abcde\nf", 7);
    ASSERT_EQ(need, 8);
    ASSERT_STREQ(out, "abcde\\n");
    need = ft__printable(out, sizeof out, "abcdef\xc3\xa9", 8);
    ASSERT_EQ(need, 8);
    ASSERT_STREQ(out, "abcdef");
    need = ft__printable(out, 1, "abc", 3);
    ASSERT_EQ(need, 3);
    ASSERT_STREQ(out, "");
    ASSERT_EQ(ft__printable(NULL, 0, "a\x1b", 2), 5);
    ASSERT_STREQ(ft__printable_str(out, sizeof out, NULL), "");
    ASSERT_STREQ(ft__printable_str(out, sizeof out, "x\ty"), "x\\ty");
}

/* The environment's switches: on when set to anything but "", 0, no, off or false. */
static void test_env_on(void)
{
    static const char *const on[] = {"1", "yes", "on", "true", "2", "debug"};
    static const char *const off[] = {"", "0", "no", "NO", "off", "Off", "false", "FALSE"};
    size_t i;

    unsetenv("FT_TEST_SWITCH");
    ASSERT_TRUE(!ft__env_on("FT_TEST_SWITCH"));
    for (i = 0; i < sizeof on / sizeof on[0]; i++) {
        setenv("FT_TEST_SWITCH", on[i], 1);
        ASSERT_TRUE(ft__env_on("FT_TEST_SWITCH"));
    }
    for (i = 0; i < sizeof off / sizeof off[0]; i++) {
        setenv("FT_TEST_SWITCH", off[i], 1);
        ASSERT_TRUE(!ft__env_on("FT_TEST_SWITCH"));
    }
    unsetenv("FT_TEST_SWITCH");
}

FT_TEST_MAIN(FT_CASE(test_control_characters), FT_CASE(test_utf8), FT_CASE(test_truncation), FT_CASE(test_env_on))
