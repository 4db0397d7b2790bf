#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runtime/driver.h"

int cli_fail(const char *cmd, const ft_err *err)
{
    fprintf(stderr, "flashtune %s: %s\n", cmd, err->msg);
    if (err->code == FT_ERR_INTERRUPTED)
        return EXIT_INTERRUPTED;
    if (err->code == FT_ERR_INVALID_ARGUMENT)
        return EXIT_USAGE;
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "flashtune %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'flashtune %s --help')\n", cmd);
    return EXIT_USAGE;
}

static volatile sig_atomic_t stop_flag;

/* The flag is read by other threads too (the compile pool, the tuner's compile thread): stored
 * atomically (lock-free, so safe in a handler); errno kept for the code the signal interrupted. */
static void on_signal(int sig)
{
    int saved = errno;
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the process at once */
    errno = saved;
}

volatile int *cli_stop_flag(void)
{
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    return (volatile int *)&stop_flag; /* sig_atomic_t is int on the platforms we build for */
}

int cli_parse_int(const char *cmd, const char *opt, const char *text, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
        cli_usage_error(cmd, "%s takes an integer from %ld to %ld, not '%s'", opt, min, max, text);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_name_contains(const char *name, const char *part)
{
    size_t n = strlen(part), i, j;

    for (i = 0; name[i] != '\0'; i++) {
        for (j = 0; j < n && name[i + j] != '\0' &&
                    tolower((unsigned char)name[i + j]) == tolower((unsigned char)part[j]);
             j++)
            ;
        if (j == n)
            return 1;
    }
    return n == 0;
}

int cli_parse_device(const char *cmd, const char *text, int all_ok, int *out, int *status)
{
    const ft_cuda *cu;
    ft_err err;
    int count = 0, i;
    size_t k;

    *status = EXIT_USAGE;
    if (text[0] == '\0') {
        cli_usage_error(cmd, "--device takes a GPU ordinal, part of a GPU's name%s, not ''", all_ok ? " or all" : "");
        return 0;
    }
    if (strcmp(text, "all") == 0) {
        if (!all_ok) {
            cli_usage_error(cmd, "--device all shares work among GPUs, which only tune does");
            return 0;
        }
        *out = -1;
        return 1;
    }
    for (k = 0; text[k] >= '0' && text[k] <= '9'; k++)
        ;
    if (text[k] == '\0') {
        long v;
        if (!cli_parse_int(cmd, "--device", text, 0, 1023, &v))
            return 0;
        *out = (int)v;
        return 1;
    }
    *status = 1;
    if (ft__cuda_load(&cu, &err) != FT_OK) {
        fprintf(stderr, "flashtune %s: --device %s names a GPU, but there is none here: %s\n", cmd, text, err.msg);
        return 0;
    }
    cu->p_cuDeviceGetCount(&count);
    for (i = 0; i < count; i++) {
        ft_arch a;
        if (ft__cuda_device_arch(cu, i, &a, &err) == FT_OK && cli_name_contains(a.device_name, text)) {
            *out = i;
            return 1;
        }
    }
    fprintf(stderr, "flashtune %s: no GPU's name contains '%s' (%d GPU%s here; flashtune devices lists them)\n", cmd,
            text, count, count == 1 ? "" : "s");
    return 0;
}
