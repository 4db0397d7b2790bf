/* NVRTC's log, read back (runtime/compile.h): the resources ptxas reports for a compiled
 * source, whether its wgmma instructions were serialized, and the first error of a failed
 * compile. */
#include "runtime/compile.h"

#include <stdio.h>
#include <string.h>

static const char *skip_to(const char *s, const char *marker)
{
    const char *p = strstr(s, marker);
    return p ? p + strlen(marker) : NULL;
}

int ft__parse_ptxas_report(const char *log, ft_resource_report *out)
{
    const char *line;
    int found = 0;

    out->registers = -1;
    out->barriers = -1;
    out->smem_static = 0;
    out->stack_frame = -1;
    out->spill_stores = -1;
    out->spill_loads = -1;
    if (log == NULL)
        return 0;
    for (line = log; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        char buf[512];
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *p;
        int regs;

        if (n >= sizeof buf)
            n = sizeof buf - 1;
        memcpy(buf, line, n);
        buf[n] = '\0';
        line = end ? end + 1 : NULL;

        /* "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" */
        if (strstr(buf, "bytes stack frame") != NULL) {
            long long a, b, c;
            p = strchr(buf, '.');
            if (p != NULL &&
                sscanf(p + 1, " %lld bytes stack frame, %lld bytes spill stores, %lld bytes spill loads",
                       &a, &b, &c) == 3) {
                /* one report per kernel of the source: the largest frame, every spill */
                out->stack_frame = a > out->stack_frame ? a : out->stack_frame;
                out->spill_stores = (out->spill_stores > 0 ? out->spill_stores : 0) + b;
                out->spill_loads = (out->spill_loads > 0 ? out->spill_loads : 0) + c;
            }
            continue;
        }
        /* "ptxas info    : Used 168 registers, used 2 barriers, 8200 bytes smem, 400 bytes cmem[0]" */
        /* One line per kernel. The main kernel is the one with the most registers (a source's
         * pre and post kernels are small): its barriers and static shared memory are the ones
         * its launch adds the dynamic shared memory to. */
        p = skip_to(buf, "Used ");
        if (p != NULL && strstr(buf, "registers") != NULL && sscanf(p, "%d registers", &regs) == 1) {
            found = 1;
            if (regs > out->registers) {
                const char *q = skip_to(buf, "used ");
                int bars;
                out->registers = regs;
                out->barriers = q != NULL && sscanf(q, "%d barriers", &bars) == 1 ? bars : -1;
                out->smem_static = 0;
                for (q = buf; (q = strstr(q, ", ")) != NULL; q += 2) {
                    long long bytes;
                    char what[16];
                    if (sscanf(q + 2, "%lld bytes %15[a-z]", &bytes, what) == 2 && strcmp(what, "smem") == 0)
                        out->smem_static = bytes;
                }
            }
        }
    }
    return found;
}

int ft__log_wgmma_serialized(const char *log, char *why, size_t cap)
{
    /* "ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are
     *  serialized due to <cause> in the function '<name>'" */
    static const char marker[] = "wgmma.mma_async instructions are serialized";
    const char *hit, *line, *code, *cause, *end;
    int n;

    if (cap > 0)
        why[0] = '\0';
    if (log == NULL || (hit = strstr(log, marker)) == NULL)
        return 0;
    for (line = hit; line > log && line[-1] != '\n'; line--)
        ;
    end = hit + strcspn(hit, "\n");
    code = strchr(line, '(');
    if (code != NULL && code > hit)
        code = NULL;
    cause = hit + strlen(marker);
    if (strncmp(cause, " due to ", 8) == 0)
        cause += 8;
    {
        const char *fn = strstr(cause, " in the function");
        if (fn != NULL && fn < end)
            end = fn;
    }
    n = (int)(end - cause);
    if (code != NULL)
        snprintf(why, cap, "%.*s: %.*s", (int)strcspn(code + 1, ")"), code + 1, n, cause);
    else
        snprintf(why, cap, "%.*s", n, cause);
    return 1;
}

void ft__log_first_error(const char *log, char *out, size_t cap)
{
    const char *line = log;
    const char *pick = NULL;
    size_t n;

    if (cap == 0)
        return;
    out[0] = '\0';
    if (log == NULL)
        return;
    while (line != NULL && *line != '\0') {
        const char *end = strchr(line, '\n');
        n = end ? (size_t)(end - line) : strlen(line);
        if (pick == NULL && n > 0)
            pick = line; /* the first non-empty line, unless an error line follows */
        if (memmem(line, n, "error", 5) != NULL) {
            pick = line;
            break;
        }
        line = end ? end + 1 : NULL;
    }
    if (pick == NULL)
        return;
    n = strcspn(pick, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, pick, n);
    out[n] = '\0';
}
