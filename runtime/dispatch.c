#include "dispatch.h"

#include <math.h>
#include <string.h>

int ft__nearest_bucket(const ft_db_bucket *want, const ft_db_bucket *cands, int n)
{
    double best = INFINITY;
    int pick = -1;
    int i;

    for (i = 0; i < n; i++) {
        const ft_db_bucket *c = &cands[i];
        double d;
        if (strcmp(c->dtype, want->dtype) != 0 || c->head_dim != want->head_dim || c->causal != want->causal ||
            c->seqlen_bucket <= 0 || c->bh_bucket <= 0)
            continue;
        d = fabs(log2((double)c->seqlen_bucket / want->seqlen_bucket)) +
            0.5 * fabs(log2((double)c->bh_bucket / want->bh_bucket));
        if (d < best - 1e-9 || (fabs(d - best) <= 1e-9 && c->seqlen_bucket > cands[pick].seqlen_bucket)) {
            best = d;
            pick = i;
        }
    }
    return pick;
}
