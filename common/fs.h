/* Files and directories. */
#ifndef FT_COMMON_FS_H
#define FT_COMMON_FS_H

#include <stddef.h>

#include "error.h"

/* The largest file ft__read_file reads (1 GiB): more is refused before anything is read. */
#define FT_READ_MAX ((size_t)1 << 30)

/* Reads a whole regular file of at most max bytes (0: FT_READ_MAX); *data is NUL-terminated
 * (not counted in *size) and freed by the caller. A directory, FIFO, device or socket is
 * refused without blocking (FT_ERR_IO, "not a regular file"), and so is a file larger than the
 * limit (FT_ERR_IO, naming both sizes) before it is read. On failure *data is NULL. */
ft_status ft__read_file_max(const char *path, size_t max, char **data, size_t *size, ft_err *err);
ft_status ft__read_file(const char *path, char **data, size_t *size, ft_err *err);

/* Reads at most cap bytes from the start of a regular file (refused as above) into buf;
 * *got is how many were read, *file_size the file's size. */
ft_status ft__read_file_head(const char *path, void *buf, size_t cap, size_t *got,
                             size_t *file_size, ft_err *err);

/* Whether path names a regular file (1), nothing (0), or something else (-1, with err set:
 * a directory, a FIFO, a device, a dangling symbolic link). A symbolic link to a regular file
 * counts as a regular file. */
int ft__path_kind(const char *path, ft_err *err);

/* Flags of ft__write_file_atomic. */
#define FT_WRITE_DURABLE 1 /* fsync the file before the rename and its directory after it */

/* Writes a file so that readers see either the old content or the whole new content: a new
 * temporary file created exclusively (O_EXCL, never following a link) in the target's
 * directory, then rename(2). The target must be absent or a regular file; a symbolic link to
 * a regular file is kept and the file it points to is replaced. The directory must exist: none
 * is created. Nothing at the path changes on failure. */
ft_status ft__write_file_atomic(const char *path, const void *data, size_t size, int flags,
                                ft_err *err);

/* mkdir -p (for flashtune's own directories: the cache, the default database's). */
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
