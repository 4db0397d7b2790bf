/* Internal error reporting: a status code plus a message the caller can print. */
#ifndef FT_COMMON_ERROR_H
#define FT_COMMON_ERROR_H

#include <stddef.h>

#include "flashtune.h"

#define FT_ERR_MSG_MAX 2048

/* The detail of a failure: the code that was returned and a one-paragraph message
 * ("specs/x.lua:12: attempt to index a nil value", the NVRTC log's first line, ...).
 * Callers own it, usually on the stack; functions that fail fill it, those that succeed
 * leave it alone. */
typedef struct ft_err {
    ft_status code;
    char msg[FT_ERR_MSG_MAX];
} ft_err;

/* Fills *err (if err is not NULL) with code and a printf-style message; returns code so
 * that `return ft__fail(err, FT_ERR_IO, "...")` reads naturally. */
ft_status ft__fail(ft_err *err, ft_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an error's message (context added on the way up). */
void ft__err_prefix(ft_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void ft__err_clear(ft_err *err);

#endif
