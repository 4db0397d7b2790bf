#include "json.h"

/* The length of the well-formed UTF-8 sequence at s, or 0 (RFC 3629, as common/jsonparse.c
 * reads it: no overlong forms, no surrogates, nothing beyond U+10FFFF). s is NUL-terminated, so
 * a sequence cut short ends at a byte that is no continuation. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))
            return 0;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80 || (c == 0xf0 && s[1] < 0x90) ||
            (c == 0xf4 && s[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

/* s as a JSON string literal, handed piecewise to put. Bytes that are not UTF-8 (a database
 * can hold any) are written as U+FFFD, so that the output is always valid JSON. */
static void write_string(const char *s, void (*put)(void *, const char *, size_t), void *out)
{
    const unsigned char *p;
    char u[8];

    if (s == NULL) {
        put(out, "null", 4);
        return;
    }
    put(out, "\"", 1);
    for (p = (const unsigned char *)s; *p != '\0';) {
        size_t n;
        switch (*p) {
        case '"': put(out, "\\\"", 2); p++; continue;
        case '\\': put(out, "\\\\", 2); p++; continue;
        case '\n': put(out, "\\n", 2); p++; continue;
        case '\r': put(out, "\\r", 2); p++; continue;
        case '\t': put(out, "\\t", 2); p++; continue;
        default: break;
        }
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(u, sizeof u, "\\u%04x", *p);
            put(out, u, 6);
            p++;
            continue;
        }
        n = utf8_len(p);
        if (n == 0) {
            put(out, "\\ufffd", 6);
            p++;
            continue;
        }
        put(out, (const char *)p, n);
        p += n;
    }
    put(out, "\"", 1);
}

static void put_file(void *f, const char *s, size_t n)
{
    fwrite(s, 1, n, f);
}

static void put_sb(void *sb, const char *s, size_t n)
{
    ft__sb_append(sb, s, n);
}

void ft__json_string(FILE *f, const char *s)
{
    write_string(s, put_file, f);
}

void ft__json_string_sb(ft_strbuf *sb, const char *s)
{
    write_string(s, put_sb, sb);
}
