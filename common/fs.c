#define _POSIX_C_SOURCE 200809L
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *kind_name(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

/* Opens a regular file for reading without blocking on a FIFO or a device; *st is its status. */
static int open_regular(const char *path, struct stat *st, ft_err *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

    if (fd < 0) {
        ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        ft__fail(err, FT_ERR_IO, "%s: %s, not a regular file", path, kind_name(st->st_mode));
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads up to n bytes; *got is how many came before end of file. */
static int read_all(int fd, void *buf, size_t n, size_t *got)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

ft_status ft__read_file_max(const char *path, size_t max, char **data, size_t *size, ft_err *err)
{
    ft_status rc = FT_ERR_IO;
    struct stat st;
    char *buf = NULL;
    size_t n, got = 0;
    char extra;
    int fd;

    *data = NULL;
    *size = 0;
    if (max == 0 || max > FT_READ_MAX)
        max = FT_READ_MAX;
    fd = open_regular(path, &st, err);
    if (fd < 0)
        return FT_ERR_IO;
    if (st.st_size < 0 || (uintmax_t)st.st_size > max) {
        ft__fail(err, FT_ERR_IO, "%s: %jd bytes, more than the %zu this file may have", path,
                 (intmax_t)st.st_size, max);
        goto out;
    }
    n = (size_t)st.st_size;
    buf = malloc(n + 1);
    if (buf == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, n);
        goto out;
    }
    if (read_all(fd, buf, n, &got) != 0) {
        ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (got != n || (read_all(fd, &extra, 1, &got) == 0 && got != 0)) {
        ft__fail(err, FT_ERR_IO, "%s: changed size while it was read", path);
        goto out;
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    buf = NULL;
    rc = FT_OK;
out:
    free(buf);
    close(fd);
    return rc;
}

ft_status ft__read_file(const char *path, char **data, size_t *size, ft_err *err)
{
    return ft__read_file_max(path, 0, data, size, err);
}

ft_status ft__read_file_head(const char *path, void *buf, size_t cap, size_t *got,
                             size_t *file_size, ft_err *err)
{
    ft_status rc = FT_OK;
    struct stat st;
    int fd;

    *got = 0;
    *file_size = 0;
    fd = open_regular(path, &st, err);
    if (fd < 0)
        return FT_ERR_IO;
    if (read_all(fd, buf, cap, got) != 0)
        rc = ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
    *file_size = st.st_size > 0 ? (size_t)st.st_size : 0;
    close(fd);
    return rc;
}

int ft__path_kind(const char *path, ft_err *err)
{
    struct stat st;

    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) && stat(path, &st) != 0) {
        ft__fail(err, FT_ERR_IO, "%s: a symbolic link to nothing (%s)", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        ft__fail(err, FT_ERR_IO, "%s: %s, not a regular file", path, kind_name(st.st_mode));
        return -1;
    }
    return 1;
}

ft_status ft__mkdirs(const char *path, ft_err *err)
{
    char tmp[4096];
    size_t n = strlen(path);
    size_t i;

    if (n == 0 || n >= sizeof tmp)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "bad directory path '%s'", path);
    memcpy(tmp, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0')
            continue;
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return ft__fail(err, FT_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
        if (i < n)
            tmp[i] = '/';
    }
    return FT_OK;
}

ft_status ft__write_file_atomic(const char *path, const void *data, size_t size, int flags,
                                ft_err *err)
{
    ft_status rc = FT_ERR_IO;
    char target[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX + 64];
    const char *base, *slash;
    struct stat st, dst;
    int have_old = 0, fd = -1, made = 0, attempt;
    size_t done = 0;
    static unsigned counter;

    if (path == NULL || path[0] == '\0')
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "an empty file name");
    if (strlen(path) >= sizeof target)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "path too long: %.200s...", path);
    strcpy(target, path);
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            /* Keep the link; replace the file it points to. */
            if (realpath(path, target) == NULL || stat(target, &st) != 0)
                return ft__fail(err, FT_ERR_IO, "%s: a symbolic link to nothing; not written", path);
        }
        if (!S_ISREG(st.st_mode))
            return ft__fail(err, FT_ERR_IO, "%s: %s, not a regular file; not replaced", path,
                            kind_name(st.st_mode));
        have_old = 1;
    } else if (errno != ENOENT) {
        return ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
    }
    slash = strrchr(target, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
        base = target;
    } else {
        size_t dn = slash == target ? 1 : (size_t)(slash - target);
        memcpy(dir, target, dn);
        dir[dn] = '\0';
        base = slash + 1;
    }
    if (base[0] == '\0')
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s: names a directory, not a file", path);
    if (stat(dir, &dst) != 0)
        return ft__fail(err, FT_ERR_IO, "%s: directory %s: %s", path, dir, strerror(errno));
    if (!S_ISDIR(dst.st_mode))
        return ft__fail(err, FT_ERR_IO, "%s: %s is not a directory", path, dir);
    for (attempt = 0; attempt < 100 && fd < 0; attempt++) {
        unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld.%u", dir, base, (long)getpid(), n);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            ft__fail(err, FT_ERR_IO, "cannot create a temporary file in %s: %s", dir,
                     strerror(errno));
            goto out;
        }
    }
    if (fd < 0) {
        ft__fail(err, FT_ERR_IO, "cannot create a temporary file in %s: every name is taken", dir);
        goto out;
    }
    made = 1;
    if (have_old)
        (void)fchmod(fd, st.st_mode & 07777);
    while (done < size) {
        ssize_t w = write(fd, (const char *)data + done, size - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            ft__fail(err, FT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
            goto out;
        }
        done += (size_t)w;
    }
    if ((flags & FT_WRITE_DURABLE) && fsync(fd) != 0) {
        ft__fail(err, FT_ERR_IO, "cannot write %s: fsync: %s", path, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        ft__fail(err, FT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, target) != 0) {
        ft__fail(err, FT_ERR_IO, "cannot replace %s: %s", path, strerror(errno));
        goto out;
    }
    made = 0;
    if (flags & FT_WRITE_DURABLE) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fsync(dfd) != 0) {
            ft__fail(err, FT_ERR_IO, "%s: written, but its directory could not be synced: %s",
                     path, strerror(errno));
            if (dfd >= 0)
                close(dfd);
            goto out;
        }
        close(dfd);
    }
    rc = FT_OK;
out:
    if (fd >= 0)
        close(fd);
    if (made)
        unlink(tmp);
    return rc;
}

ft_status ft__user_dir(const char *env_override, const char *xdg_var, const char *home_fallback,
                       char *out, size_t cap, ft_err *err)
{
    char name[64];
    const char *v;
    int n;

    v = env_override != NULL ? getenv(env_override) : NULL;
    if (v != NULL && v[0] != '\0') {
        n = snprintf(out, cap, "%s", v);
        goto done;
    }
    snprintf(name, sizeof name, "XDG_%s", xdg_var);
    v = getenv(name);
    if (v != NULL && v[0] == '/') {
        n = snprintf(out, cap, "%s/flashtune", v);
        goto done;
    }
    v = getenv("HOME");
    if (v == NULL || v[0] == '\0')
        return ft__fail(err, FT_ERR_IO, "neither %s, $%s nor $HOME is set",
                        env_override ? env_override : "an override", name);
    n = snprintf(out, cap, "%s/%s/flashtune", v, home_fallback);
done:
    if (n < 0 || (size_t)n >= cap)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "directory path too long");
    return FT_OK;
}

double ft__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int ft__cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
