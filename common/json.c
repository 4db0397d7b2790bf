#include "json.h"

/* s as a JSON string literal, handed piecewise to put. */
static void write_string(const char *s, void (*put)(void *, const char *, size_t), void *out)
{
    const unsigned char *p;
    char u[8];

    if (s == NULL) {
        put(out, "null", 4);
        return;
    }
    put(out, "\"", 1);
    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        switch (*p) {
        case '"': put(out, "\\\"", 2); break;
        case '\\': put(out, "\\\\", 2); break;
        case '\n': put(out, "\\n", 2); break;
        case '\r': put(out, "\\r", 2); break;
        case '\t': put(out, "\\t", 2); break;
        default:
            if (*p < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", *p);
                put(out, u, 6);
            } else {
                put(out, (const char *)p, 1);
            }
        }
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
