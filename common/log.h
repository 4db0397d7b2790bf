/* The library's diagnostic lines: to the handler an application set (ft_set_log_handler, defined
 * here), else to stderr (debug lines only while FLASHTUNE_DEBUG is on). */
#ifndef FT_COMMON_LOG_H
#define FT_COMMON_LOG_H

#include "flashtune.h"

/* One line at level (FT_LOG_DEBUG, FT_LOG_WARNING), without a newline; longer than 1023 bytes it
 * is cut. The handler is called outside any lock of this module. */
void ft__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
