#define _POSIX_C_SOURCE 200809L
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

ft_status ft__read_file(const char *path, char **data, size_t *size, ft_err *err)
{
    ft_status rc = FT_ERR_IO;
    FILE *f = NULL;
    char *buf = NULL;
    long n;

    *data = NULL;
    *size = 0;
    f = fopen(path, "rb");
    if (f == NULL) {
        ft__fail(err, FT_ERR_IO, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        ft__fail(err, FT_ERR_IO, "%s: cannot determine size: %s", path, strerror(errno));
        goto out;
    }
    buf = malloc((size_t)n + 1);
    if (buf == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory reading %ld bytes", path, n);
        goto out;
    }
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        ft__fail(err, FT_ERR_IO, "%s: short read", path);
        goto out;
    }
    buf[n] = '\0';
    *data = buf;
    *size = (size_t)n;
    buf = NULL;
    rc = FT_OK;
out:
    free(buf);
    if (f != NULL)
        fclose(f);
    return rc;
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

ft_status ft__write_file_atomic(const char *path, const void *data, size_t size, ft_err *err)
{
    ft_status rc = FT_ERR_IO;
    char dir[4096];
    char tmp[4200];
    const char *slash = strrchr(path, '/');
    int fd = -1;
    size_t done = 0;
    static unsigned counter;

    if (slash != NULL && slash != path) {
        size_t dn = (size_t)(slash - path);
        if (dn >= sizeof dir)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "path too long: %s", path);
        memcpy(dir, path, dn);
        dir[dn] = '\0';
        rc = ft__mkdirs(dir, err);
        if (rc != FT_OK)
            return rc;
        rc = FT_ERR_IO;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ft__fail(err, FT_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    while (done < size) {
        ssize_t w = write(fd, (const char *)data + done, size - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            ft__fail(err, FT_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
            goto out;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        fd = -1;
        ft__fail(err, FT_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        ft__fail(err, FT_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    rc = FT_OK;
out:
    if (fd >= 0)
        close(fd);
    if (rc != FT_OK)
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
