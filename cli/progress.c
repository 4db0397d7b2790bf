#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/fs.h"

void cli_format_duration(double ms, char *out, size_t cap)
{
    double s = ms / 1000.0;

    if (s < 60)
        snprintf(out, cap, "%.1fs", s);
    else if (s < 3600)
        snprintf(out, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(out, cap, "%dh%02dm", (int)(s / 3600), ((int)s % 3600) / 60);
}

void cli_progress_start(cli_progress *p, const char *label, int total, int quiet)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = ft__now_ms();
    p->last_print = p->t0;
    p->last_pct = -1;
}

void cli_progress_update(cli_progress *p, int done, const char *note)
{
    double now = ft__now_ms();
    double elapsed = now - p->t0;
    int pct = p->total > 0 ? (int)(100.0 * done / p->total) : 100;
    char eta[32] = "?";

    if (p->quiet || p->total <= 0)
        return;
    if (done > 0 && done < p->total)
        cli_format_duration(elapsed / done * (p->total - done), eta, sizeof eta);
    else if (done >= p->total)
        snprintf(eta, sizeof eta, "0s");
    if (p->tty) {
        char bar[31];
        int fill = p->total > 0 ? 30 * done / p->total : 30;
        if (now - p->last_print < 100 && done < p->total)
            return; /* at most ten redraws a second */
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, '.', (size_t)(30 - fill));
        bar[30] = '\0';
        fprintf(stderr, "\r\033[K%s [%s] %d/%d %3d%% ETA %s  %.40s", p->label, bar, done, p->total,
                pct, eta, note ? note : "");
        fflush(stderr);
    } else {
        if (done < p->total && pct / 5 == p->last_pct / 5 && now - p->last_print < 10000)
            return;
        fprintf(stderr, "%s: %d/%d (%d%%), ETA %s\n", p->label, done, p->total, pct, eta);
        p->last_pct = pct;
    }
    p->last_print = now;
}

void cli_progress_finish(cli_progress *p)
{
    if (!p->quiet && p->tty && p->total > 0) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}
