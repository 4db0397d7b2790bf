/* Writing JSON text. */
#ifndef FT_COMMON_JSON_H
#define FT_COMMON_JSON_H

#include <stdio.h>

/* Writes s as a JSON string literal (quotes included); NULL writes null. */
void ft__json_string(FILE *f, const char *s);

#endif
