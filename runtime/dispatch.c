/* Choosing a tuned kernel for a call, and the checks a tuned kernel passes before it is loaded. */
#include "dispatch.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "generator/check.h"
#include "ops/problem.h"
#include "runtime/session.h"

static int fail(char *why, size_t cap, const char *msg)
{
    if (why != NULL && cap > 0)
        snprintf(why, cap, "%s", msg);
    return 0;
}

int ft__db_winner_check(const ft_spec *spec, const ft_variant *v, const char *family, const char *arch,
                        const ft_key *want, const void *cubin, size_t size, const char *entry, int cc,
                        char *why, size_t cap)
{
    char msg[300];
    ft_problem p;
    long long d = ft__key_get(want, "d", -1), causal = ft__key_get(want, "causal", -1);

    memset(&p, 0, sizeof p);
    ft__variant_problem(spec, v, &p);
    if (p.head_dim != d || p.causal != causal || p.bf16 != (strcmp(want->dtype, "bf16") == 0)) {
        snprintf(msg, sizeof msg, "it computes d=%d causal=%d %s, but it is recorded as the winner of d=%lld "
                 "causal=%lld %s", p.head_dim, p.causal, p.bf16 ? "bf16" : "f16", d, causal, want->dtype);
        return fail(why, cap, msg);
    }
    if (p.deterministic != ft__key_get(want, "det", 0)) {
        snprintf(msg, sizeof msg, "it is%s deterministic, but it is recorded as the winner of a%s deterministic "
                 "bucket", p.deterministic ? "" : " not", ft__key_get(want, "det", 0) ? "" : " non-");
        return fail(why, cap, msg);
    }
    if (!ft__kernel_target_check(family, arch, cc, why, cap))
        return 0;
    return ft__family_cubin_check(family, cubin, size, cc, entry, why, cap);
}
