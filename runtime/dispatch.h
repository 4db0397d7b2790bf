/* Choosing a tuned kernel for a call. */
#ifndef FT_RUNTIME_DISPATCH_H
#define FT_RUNTIME_DISPATCH_H

#include "tuning_db/db.h"

/* Index of the candidate bucket nearest to want, or -1 when there is none with want's dtype,
 * head dim and causality. Distance: |log2 seqlen ratio| + 0.5·|log2 batch·heads ratio|; ties
 * go to the longer sequence (whose kernels amortise their start-up over more tiles). */
int ft__nearest_bucket(const ft_db_bucket *want, const ft_db_bucket *cands, int n);

#endif
