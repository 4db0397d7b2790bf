/*
 * A tune's timeline (`flashtune tune --timeline FILE`): one JSON line per span of work, written
 * as the span ends, so that where a tune's wall time goes (compiling, waiting for compilations,
 * measuring, racing) can be read afterwards rather than inferred from totals:
 *
 *   {"what": "measure", "label": "flash_fwd_sm90 d=64 f16 causal=0", "start": 12.031, "end": 19.870, "n": 96}
 *
 * start and end are seconds since the tune began (its summary's wall time counts from there); n counts what the span handled
 * (variants compiled, tasks measured). Spans come from the tuner's thread and from the threads
 * compiling ahead, so each line is written whole under a lock. A write error ends the timeline,
 * not the tune (the timeline is a record of it): ft__timeline_close reports it, after the
 * measurements are in the database. A NULL timeline records nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "tuner/internal.h"

struct ft_timeline {
    pthread_mutex_t lock;
    FILE *f;
    double t0;
    int error; /* errno of the first failed write, 0 */
    char path[4096];
};

ft_status ft__timeline_open(const char *path, double t0_ms, ft_timeline **out, ft_err *err)
{
    ft_timeline *tl;

    *out = NULL;
    if (path == NULL)
        return FT_OK;
    tl = calloc(1, sizeof *tl);
    if (tl == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    tl->f = fopen(path, "w");
    if (tl->f == NULL) {
        ft_status rc = ft__fail(err, FT_ERR_IO, "cannot write the timeline %s: %s", path, strerror(errno));
        free(tl);
        return rc;
    }
    pthread_mutex_init(&tl->lock, NULL);
    snprintf(tl->path, sizeof tl->path, "%s", path);
    tl->t0 = t0_ms;
    *out = tl;
    return FT_OK;
}

/* s into out as a JSON string's contents: quotes, backslashes and control bytes dropped (labels
 * are kernel names and bucket words; nothing of them is lost). */
static void json_text(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s != '\0' && n + 1 < cap; s++)
        if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20)
            out[n++] = *s;
    out[n] = '\0';
}

void ft__timeline_span(ft_timeline *tl, const char *what, const char *label, double start_ms, double end_ms, int n)
{
    char text[320];

    if (tl == NULL)
        return;
    json_text(label != NULL ? label : "", text, sizeof text);
    pthread_mutex_lock(&tl->lock);
    if (tl->f != NULL &&
        (fprintf(tl->f, "{\"what\": \"%s\", \"label\": \"%s\", \"start\": %.3f, \"end\": %.3f, \"n\": %d}\n", what,
                 text, (start_ms - tl->t0) / 1e3, (end_ms - tl->t0) / 1e3, n) < 0 ||
         fflush(tl->f) != 0)) {
        tl->error = errno != 0 ? errno : EIO;
        fclose(tl->f);
        tl->f = NULL;
    }
    pthread_mutex_unlock(&tl->lock);
}

ft_status ft__timeline_close(ft_timeline *tl, ft_err *err)
{
    ft_status rc = FT_OK;

    if (tl == NULL)
        return FT_OK;
    if (tl->f != NULL && fclose(tl->f) != 0 && tl->error == 0)
        tl->error = errno != 0 ? errno : EIO;
    if (tl->error != 0)
        rc = ft__fail(err, FT_ERR_IO, "the tune's measurements are recorded, but its timeline %s could not be written: %s",
                      tl->path, strerror(tl->error));
    pthread_mutex_destroy(&tl->lock);
    free(tl);
    return rc;
}
