/*
 * The tuner's worker processes: started with posix_spawn, spoken to over non-blocking pipes,
 * every wait with a deadline, reaped on every path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"
#include "common/text.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "ops/problem.h"
#include "runtime/compile.h"
#include "runtime/verify.h"
#include "tuner/plan.h"
#include "tuner/internal.h"

extern char **environ;

/* ---- workers ------------------------------------------------------------------------------ */

static ft_status worker_start(tuner *tu, worker *w, ft_err *err)
{
    int to[2] = {-1, -1}, from[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t dflt, none;
    char device[16];
    char *argv[8];
    pid_t pid = -1;
    int rc;

    w->pid = -1;
    w->to_fd = w->from_fd = -1;
    w->len = 0;
    snprintf(device, sizeof device, "%d", w->device);
    argv[0] = tu->worker_path;
    argv[1] = "worker";
    argv[2] = "--device";
    argv[3] = device;
    argv[4] = "--cache-dir";
    argv[5] = tu->cache_dir;
    argv[6] = NULL;
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) {
        rc = errno;
        if (to[0] >= 0) {
            close(to[0]);
            close(to[1]);
        }
        return ft__fail(err, FT_ERR_IO, "pipe: %s", strerror(rc));
    }
    /* A worker writing to a tuner that is gone dies of SIGPIPE (the tuner ignores it, and an
     * ignored signal would stay ignored across exec). */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigemptyset(&none);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    rc = posix_spawn(&pid, tu->worker_path, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(to[0]);
    close(from[1]);
    if (rc != 0) {
        close(to[1]);
        close(from[0]);
        return ft__fail(err, FT_ERR_IO, "cannot start the worker %s: %s", tu->worker_path, strerror(rc));
    }
    /* never blocked by a worker: writes and reads wait in poll, with a deadline */
    fcntl(to[1], F_SETFL, O_NONBLOCK);
    fcntl(from[0], F_SETFL, O_NONBLOCK);
    w->pid = pid;
    w->to_fd = to[1];
    w->from_fd = from[0];
    w->waiting = P_READY;
    w->sent = ft__now_ms();
    w->deadline = w->sent + BOOT_TIMEOUT_MS;
    return FT_OK;
}

static void sleep_ms(double ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
    nanosleep(&ts, NULL);
}

/* Closes the worker's pipes and reaps it: it has grace_ms to exit by itself (less once the
 * stop flag is set), then it is killed. Returns its wait status, or -1 when there was none. */
int ft__tuner_worker_reap(const tuner *tu, worker *w, double grace_ms)
{
    const double until = ft__now_ms() + grace_ms;
    int status = -1;

    if (w->pid <= 0)
        return -1;
    close(w->to_fd);
    close(w->from_fd);
    w->to_fd = w->from_fd = -1;
    for (;;) {
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid || (r < 0 && errno != EINTR)) {
            if (r < 0)
                status = -1;
            break;
        }
        if (r == 0 && (ft__now_ms() >= until || ft__tuner_stopped(tu))) {
            kill(w->pid, SIGKILL);
            do
                r = waitpid(w->pid, &status, 0);
            while (r < 0 && errno == EINTR);
            if (r < 0)
                status = -1;
            break;
        }
        if (r == 0)
            sleep_ms(5);
    }
    w->pid = -1;
    w->len = 0;
    return status;
}

/* Ends a worker: told to quit (with QUIT_GRACE_MS to do it) or killed, and reaped either way. */
void ft__tuner_worker_stop(const tuner *tu, worker *w, int kill_it)
{
    if (w->pid <= 0)
        return;
    if (kill_it || write(w->to_fd, "quit\n", 5) != 5)
        kill(w->pid, SIGKILL);
    ft__tuner_worker_reap(tu, w, kill_it ? 0 : QUIT_GRACE_MS);
}

/* Sends a command; its answer is due within timeout_ms. 0: the worker took nothing within
 * SEND_TIMEOUT_MS, or is gone, or the stop flag is set. */
int ft__tuner_worker_send(const tuner *tu, worker *w, const char *line, double timeout_ms)
{
    const double until = ft__now_ms() + SEND_TIMEOUT_MS;
    size_t n = strlen(line), done = 0;

    while (done < n) {
        ssize_t k = write(w->to_fd, line + done, n - done);
        int again = k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if ((k < 0 && errno != EINTR && !again) || ft__tuner_stopped(tu) || ft__now_ms() >= until)
            return 0;
        if (again) {
            struct pollfd p = {w->to_fd, POLLOUT, 0};
            poll(&p, 1, 100);
        }
    }
    w->sent = ft__now_ms();
    w->deadline = w->sent + timeout_ms;
    return 1;
}

/* Reads what the worker has sent into its buffer (at most what fits). 0: end of file or an
 * error (the worker is gone); 1: otherwise, also when nothing was there yet. */
int ft__tuner_worker_read(worker *w)
{
    for (;;) {
        ssize_t k;
        if (w->len == sizeof w->buf)
            return 1; /* full: worker_line says the line is too long */
        k = read(w->from_fd, w->buf + w->len, sizeof w->buf - w->len);
        if (k > 0) {
            w->len += (size_t)k;
            return 1;
        }
        if (k == 0)
            return 0;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }
}

/* Takes one complete line out of the worker's buffer: 1 (the line in out, cap >= LINE_MAX_BYTES),
 * 0 (no complete line yet), -1 (a line longer than the limit, or a NUL byte: why says which). */
int ft__tuner_worker_line(worker *w, char *out, size_t cap, char *why, size_t why_cap)
{
    char *nl = memchr(w->buf, '\n', w->len);
    size_t n;

    if (nl == NULL) {
        if (w->len < sizeof w->buf && w->len < cap)
            return 0;
        snprintf(why, why_cap, "a line longer than %d bytes", LINE_MAX_BYTES - 1);
        return -1;
    }
    n = (size_t)(nl - w->buf);
    if (n >= cap || memchr(w->buf, '\0', n) != NULL) {
        snprintf(why, why_cap, n >= cap ? "a line longer than %d bytes" : "a NUL byte in a line",
                 LINE_MAX_BYTES - 1);
        return -1;
    }
    memcpy(out, w->buf, n);
    out[n] = '\0';
    w->len -= n + 1;
    memmove(w->buf, nl + 1, w->len);
    return 1;
}

/* Starts a worker and waits for its ready line, which fills w->count, w->arch and w->dev. */
ft_status ft__tuner_worker_boot(tuner *tu, worker *w, ft_err *err)
{
    char line[LINE_MAX_BYTES], why[256], shown[512];
    ft_status rc = worker_start(tu, w, err);

    while (rc == FT_OK) {
        struct pollfd pfd = {w->from_fd, POLLIN, 0};
        double left = w->deadline - ft__now_ms();
        int got = ft__tuner_worker_line(w, line, sizeof line, why, sizeof why);
        if (got < 0) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker's ready line: %s", w->device, why);
            break;
        }
        if (got > 0 && strncmp(line, "error ", 6) == 0) { /* the worker's own reason: no GPU, ... */
            ft__printable_str(shown, sizeof shown, line + 6);
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: %s", w->device, shown);
            break;
        }
        if (got > 0) {
            ft_err perr;
            ft_status prc = ft__tuner_parse_ready(line, &w->count, &w->arch, &w->dev, &perr);
            if (prc == FT_ERR_COMPILE) { /* NVRTC's version: not the worker's fault */
                *err = perr;
                rc = prc;
                break;
            }
            if (prc != FT_OK) {
                ft__printable_str(shown, 200, line);
                rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker's ready line: %s (%s)", w->device, perr.msg,
                              shown);
                break;
            }
            w->waiting = P_NONE;
            return FT_OK;
        }
        if (ft__tuner_stopped(tu)) {
            rc = ft__tuner_interrupted(tu, err);
            break;
        }
        if (left <= 0) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker did not start within %.0f s", w->device,
                          BOOT_TIMEOUT_MS / 1e3);
            break;
        }
        if (poll(&pfd, 1, (int)fmin(left, 1000)) < 0 && errno != EINTR) {
            rc = ft__fail(err, FT_ERR_IO, "poll: %s", strerror(errno));
            break;
        }
        if (!ft__tuner_worker_read(w)) {
            rc = ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker exited before it was ready", w->device);
            break;
        }
    }
    ft__tuner_worker_stop(tu, w, 1);
    return rc;
}

