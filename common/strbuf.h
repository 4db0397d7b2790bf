/* A growable, always NUL-terminated string. */
#ifndef FT_COMMON_STRBUF_H
#define FT_COMMON_STRBUF_H

#include <stddef.h>

typedef struct ft_strbuf {
    char *data; /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    int failed; /* set once an allocation failed; later appends do nothing */
} ft_strbuf;

#define FT_STRBUF_INIT {NULL, 0, 0, 0}

void ft__sb_append(ft_strbuf *sb, const char *s, size_t n);
void ft__sb_puts(ft_strbuf *sb, const char *s);
void ft__sb_printf(ft_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the buffer to the caller (free() it); returns NULL if an allocation failed. */
char *ft__sb_take(ft_strbuf *sb);
void ft__sb_free(ft_strbuf *sb);

/* strdup that returns NULL for NULL. */
char *ft__strdup(const char *s);

#endif
