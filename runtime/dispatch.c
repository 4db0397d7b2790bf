/* Choosing a tuned kernel for a call, and the checks a tuned kernel passes before it is loaded. */
#include "dispatch.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "generator/check.h"
#include "ops/problem.h"
#include "runtime/session.h"

int ft__nearest_bucket(const ft_db_bucket *want, const ft_db_bucket *cands, int n)
{
    double best = INFINITY;
    int pick = -1;
    int i;

    if (want->seqlen_bucket <= 0 || want->bh_bucket <= 0)
        return -1;
    for (i = 0; i < n; i++) {
        const ft_db_bucket *c = &cands[i];
        double d;
        if (strcmp(c->dtype, want->dtype) != 0 || c->head_dim != want->head_dim || c->causal != want->causal ||
            c->seqlen_bucket <= 0 || c->bh_bucket <= 0)
            continue;
        d = fabs(log2((double)c->seqlen_bucket / want->seqlen_bucket)) +
            0.5 * fabs(log2((double)c->bh_bucket / want->bh_bucket));
        if (pick < 0 || d < best - 1e-9 || (fabs(d - best) <= 1e-9 && c->seqlen_bucket > cands[pick].seqlen_bucket)) {
            best = d;
            pick = i;
        }
    }
    return pick;
}

static int fail(char *why, size_t cap, const char *msg)
{
    if (why != NULL && cap > 0)
        snprintf(why, cap, "%s", msg);
    return 0;
}

int ft__db_winner_check(const ft_spec *spec, const ft_variant *v, const char *family, const char *arch,
                        const ft_db_bucket *want, const void *cubin, size_t size, const char *entry, int cc,
                        char *why, size_t cap)
{
    char msg[300];
    ft_problem p;

    memset(&p, 0, sizeof p);
    ft__variant_problem(spec, v, &p);
    if (p.head_dim != want->head_dim || p.causal != (want->causal != 0) ||
        p.bf16 != (strcmp(want->dtype, "bf16") == 0)) {
        snprintf(msg, sizeof msg, "it computes d=%d causal=%d %s, but it is recorded as the winner of d=%d "
                 "causal=%d %s", p.head_dim, p.causal, p.bf16 ? "bf16" : "f16", want->head_dim, want->causal,
                 want->dtype);
        return fail(why, cap, msg);
    }
    if (!ft__kernel_target_check(family, arch, cc, why, cap))
        return 0;
    return ft__cubin_check(cubin, size, cc, entry, why, cap);
}
