/* Writing JSON text. */
#ifndef FT_COMMON_JSON_H
#define FT_COMMON_JSON_H

#include <stdio.h>

#include "strbuf.h"

/* Writes s as a JSON string literal (quotes included); NULL writes null. Control characters
 * are escaped, and bytes that are not well-formed UTF-8 are written as \ufffd: the output is
 * always what common/jsonparse.h reads. */
void ft__json_string(FILE *f, const char *s);
/* The same, appended to a string buffer. */
void ft__json_string_sb(ft_strbuf *sb, const char *s);

#endif
