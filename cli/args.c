#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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

static void on_signal(int sig)
{
    stop_flag = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C ends the process at once */
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
