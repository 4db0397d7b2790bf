/* What a tuned kernel from a database must be before it is loaded (the nearest key: ops/op.h). */
#ifndef FT_RUNTIME_DISPATCH_H
#define FT_RUNTIME_DISPATCH_H

#include <stddef.h>

#include "generator/check.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "tuning_db/db.h"

/* What a database's winner must be before its cubin is loaded on a GPU of compute capability
 * cc, as a pack's must (the runtime's database path): its variant v, as the spec reads it,
 * computes the call's key want (its dtype, head dim, causality, and determinism where the key has it); it was built (arch) for the
 * target flashtune builds its family for on cc (ft__kernel_target_check); its cubin is for cc's
 * SM and defines entry, the name the variant generates, and its family's other entries
 * (ft__family_cubin_check). */
int ft__db_winner_check(const ft_spec *spec, const ft_variant *v, const char *family, const char *arch,
                        const ft_key *want, const void *cubin, size_t size, const char *entry, int cc,
                        char *why, size_t cap);

#endif
