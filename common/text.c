#include "text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes) and its code point, or 0 when
 * the bytes there are no valid sequence (a stray continuation byte, a truncated sequence, an
 * overlong form, a surrogate, or a value past U+10FFFF). */
static size_t utf8_sequence(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t want;
    uint32_t min;
    uint32_t c;
    size_t i;

    if (s[0] < 0xc2 || s[0] > 0xf4)
        return 0; /* ASCII, a continuation byte, or a lead byte that is always overlong or too big */
    if (s[0] < 0xe0) {
        want = 2;
        min = 0x80;
        c = s[0] & 0x1fu;
    } else if (s[0] < 0xf0) {
        want = 3;
        min = 0x800;
        c = s[0] & 0x0fu;
    } else {
        want = 4;
        min = 0x10000;
        c = s[0] & 0x07u;
    }
    if (n < want)
        return 0;
    for (i = 1; i < want; i++) {
        if ((s[i] & 0xc0u) != 0x80u)
            return 0;
        c = (c << 6) | (s[i] & 0x3fu);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return want;
}

/* Code points that are valid but must not reach a terminal as they are. */
static int is_hidden_code_point(uint32_t c)
{
    return (c >= 0x80 && c <= 0x9f) || c == 0x61c || c == 0x200e || c == 0x200f ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/* How the character at s is written: *esc gets its escape (NUL-terminated, empty when it is
 * copied as it is); returns how many bytes of src it covers. */
static size_t next_piece(const unsigned char *s, size_t n, char esc[8])
{
    static const char hex[] = "0123456789abcdef";
    uint32_t cp = 0;
    size_t k;

    esc[0] = '\0';
    if (s[0] >= 0x20 && s[0] < 0x7f)
        return 1;
    if (s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
        esc[0] = '\\';
        esc[1] = s[0] == '\t' ? 't' : s[0] == '\n' ? 'n' : 'r';
        esc[2] = '\0';
        return 1;
    }
    if (s[0] >= 0x80) {
        k = utf8_sequence(s, n, &cp);
        if (k > 0 && !is_hidden_code_point(cp))
            return k;
    }
    /* One byte as \xHH; the following bytes of a hidden sequence come as their own pieces. */
    esc[0] = '\\';
    esc[1] = 'x';
    esc[2] = hex[s[0] >> 4];
    esc[3] = hex[s[0] & 0xf];
    esc[4] = '\0';
    return 1;
}

size_t ft__printable(char *dst, size_t cap, const char *src, size_t len)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t need = 0;
    size_t out = 0;
    int full = cap == 0;
    size_t i = 0;

    while (i < len) {
        char esc[8];
        size_t k = next_piece(s + i, len - i, esc);
        size_t elen = esc[0] != '\0' ? strlen(esc) : k;
        if (!full && out + elen < cap) {
            memcpy(dst + out, esc[0] != '\0' ? esc : (const char *)s + i, elen);
            out += elen;
        } else {
            full = 1;
        }
        need += elen;
        i += k;
    }
    if (cap > 0)
        dst[out] = '\0';
    return need;
}

char *ft__printable_str(char *dst, size_t cap, const char *src)
{
    if (src == NULL)
        src = "";
    ft__printable(dst, cap, src, strlen(src));
    return dst;
}

int ft__is_printable(const char *src, size_t len)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0;

    while (i < len) {
        char esc[8];
        size_t k = next_piece(s + i, len - i, esc);
        if (esc[0] != '\0')
            return 0;
        i += k;
    }
    return 1;
}

int ft__env_on(const char *name)
{
    static const char *const off[] = {"", "0", "no", "off", "false"};
    const char *v = getenv(name);
    size_t i;

    if (v == NULL)
        return 0;
    for (i = 0; i < sizeof off / sizeof off[0]; i++)
        if (strcasecmp(v, off[i]) == 0)
            return 0;
    return 1;
}
