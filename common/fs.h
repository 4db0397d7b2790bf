/* Files and directories. */
#ifndef FT_COMMON_FS_H
#define FT_COMMON_FS_H

#include <stddef.h>

#include "error.h"

/* Reads a whole file; *data is NUL-terminated (not counted in *size) and freed by the
 * caller. On failure *data is NULL. */
ft_status ft__read_file(const char *path, char **data, size_t *size, ft_err *err);

/* Writes a file so that readers see either the old content or the whole new content:
 * a temporary file in the same directory, then rename(2). Creates missing directories. */
ft_status ft__write_file_atomic(const char *path, const void *data, size_t size, ft_err *err);

/* mkdir -p. */
ft_status ft__mkdirs(const char *path, ft_err *err);

/* The directory flashtune keeps a kind of file in:
 *   env_override, if that variable is set and not empty;
 *   else $XDG_<xdg_var>/flashtune (xdg_var "CACHE_HOME" or "DATA_HOME");
 *   else $HOME/<home_fallback>/flashtune (".cache" or ".local/share").
 * Fails only when none of them is set. */
ft_status ft__user_dir(const char *env_override, const char *xdg_var, const char *home_fallback,
                       char *out, size_t cap, ft_err *err);

/* Seconds on a monotonic clock, as milliseconds. */
double ft__now_ms(void);

/* The number of online processors, at least 1. */
int ft__cpu_count(void);

#endif
