#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(ft_strbuf *sb, size_t extra)
{
    size_t need = sb->len + extra + 1;
    size_t cap;
    char *p;

    if (sb->failed)
        return 0;
    if (need <= sb->cap)
        return 1;
    cap = sb->cap ? sb->cap : 256;
    while (cap < need)
        cap *= 2;
    p = realloc(sb->data, cap);
    if (p == NULL) {
        sb->failed = 1;
        return 0;
    }
    sb->data = p;
    sb->cap = cap;
    return 1;
}

void ft__sb_append(ft_strbuf *sb, const char *s, size_t n)
{
    if (!reserve(sb, n))
        return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void ft__sb_puts(ft_strbuf *sb, const char *s)
{
    ft__sb_append(sb, s, strlen(s));
}

void ft__sb_printf(ft_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(sb, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

char *ft__sb_take(ft_strbuf *sb)
{
    char *p = NULL;

    if (!sb->failed && reserve(sb, 0))
        p = sb->data;
    else
        free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
    return p;
}

void ft__sb_free(ft_strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
}

char *ft__strdup(const char *s)
{
    size_t n;
    char *p;

    if (s == NULL)
        return NULL;
    n = strlen(s) + 1;
    p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}
