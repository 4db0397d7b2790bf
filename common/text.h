/*
 * Text that came from outside (a spec's strings and error messages, a pack's fields) made safe
 * to show: on a terminal, in a one-line message, in a comment of generated source.
 */
#ifndef FT_COMMON_TEXT_H
#define FT_COMMON_TEXT_H

#include <stddef.h>

/* Copies the len bytes at src into dst (cap bytes, always NUL-terminated when cap > 0) with
 * every byte that could act on a terminal or break a line written as a visible escape:
 * tab, newline and carriage return as \t, \n and \r; the other ASCII control characters
 * (NUL included), DEL, bytes that are not valid UTF-8, and the UTF-8 encodings of the C1
 * controls (U+0080..U+009F) and of the bidirectional formatting characters (U+061C, U+200E,
 * U+200F, U+202A..U+202E, U+2066..U+2069) as \xHH, one per byte. Everything else, valid UTF-8
 * included, is copied. A backslash is not escaped, so the output is its own fixed point:
 * passing it through again changes nothing. When dst is too short the output stops before the
 * first character or escape that does not fit. Returns the length the whole output needs (as
 * snprintf does), without the NUL. */
size_t ft__printable(char *dst, size_t cap, const char *src, size_t len);

/* ft__printable of a NUL-terminated string (NULL reads as ""); returns dst. */
char *ft__printable_str(char *dst, size_t cap, const char *src);

/* Whether ft__printable would copy the len bytes at src unchanged. */
int ft__is_printable(const char *src, size_t len);

/* Whether a switch in the environment (FLASHTUNE_DEBUG, FLASHTUNE_RECORD_MISSES) is on: set,
 * and not "", "0", "no", "off" or "false" (any case). */
int ft__env_on(const char *name);

#endif
