/* Choosing a tuned kernel for a call, and what a tuned kernel must be before it is loaded. */
#ifndef FT_RUNTIME_DISPATCH_H
#define FT_RUNTIME_DISPATCH_H

#include <stddef.h>

#include "generator/check.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "tuning_db/db.h"

/* Index of the candidate bucket nearest to want, or -1 when there is none with want's dtype,
 * head dim and causality. Distance: |log2 seqlen ratio| + 0.5·|log2 batch·heads ratio|; ties
 * go to the longer sequence (whose kernels amortise their start-up over more tiles). */
int ft__nearest_bucket(const ft_db_bucket *want, const ft_db_bucket *cands, int n);

/* What a database's winner must be before its cubin is loaded on a GPU of compute capability
 * cc, as a pack's must (the runtime's database path): its variant v, as the spec reads it,
 * computes the call's bucket want (dtype, head dim, causality); it was built (arch) for the
 * target flashtune builds its family for on cc (ft__kernel_target_check); its cubin is for cc's
 * SM and defines entry, the name the variant generates (ft__cubin_check). */
int ft__db_winner_check(const ft_spec *spec, const ft_variant *v, const char *family, const char *arch,
                        const ft_db_bucket *want, const void *cubin, size_t size, const char *entry, int cc,
                        char *why, size_t cap);

#endif
