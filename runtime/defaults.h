/* The kernels the runtime builds when neither a kernel set, a pack nor a database has a winner
 * for a call (runtime/defaults.c says how each was chosen). */
#ifndef FT_RUNTIME_DEFAULTS_H
#define FT_RUNTIME_DEFAULTS_H

#include <stddef.h>

typedef struct ft_default_kernel {
    const char *family;  /* ft__family_find's name */
    int head_dim;
    int causal;          /* 0 or 1, or -1: either */
    const char *variant; /* partial: ft__default_complete completes it for a call */
    int min_rows;        /* only for calls whose key has at least this many packed rows: its sq
                            bucket (1 where it has none, as a backward key) times its group
                            bucket; 0: any */
} ft_default_kernel;

/* Every entry, in the table's order; *n: how many. */
const ft_default_kernel *ft__default_kernels(size_t *n);

/* The whole variant text of the partial variant base for a call of head dim d, causality
 * causal, determinism det and dtype: base, then each of d, causal, det and dtype that spec has
 * as a parameter, then the spec's `default` of every other parameter that has one, each where
 * base does not name it. Writes at most cap bytes to out (always terminated) and returns the
 * whole text's length: cap or more when it did not fit. */
struct ft_spec;
size_t ft__default_complete(const struct ft_spec *spec, const char *base, long long d, long long causal,
                            long long det, const char *dtype, char *out, size_t cap);

/* The entries that can serve calls of key, in the order the runtime tries them (the first whose
 * family the context has and that builds wins): those of the key's operation, head dim and
 * causality (for a head dim the table lacks, each family's entries of the nearest head dim above
 * it: a kernel's tiles for a larger head dim fit a smaller one's shared memory and registers;
 * the spec's open d then takes the call's); for a short-query forward key (ops/op.h FT_FWD_SHORT_QUERY) the short-query
 * families' first, then the others, and for any other key the others only; an entry with
 * min_rows only where the key has that many packed rows. needs (ops/op.h FT_NEEDS_*) keeps the entries
 * whose kernels read what the calls give: FT_NEEDS_SPLIT the short-query families' only, whatever
 * the key's query length (calls with a KV cache, which only they take), FT_NEEDS_PACKED those
 * that read variable-length batches (for a prefill key the short-query family's last). Writes at
 * most cap pointers to out and returns how many. */
#define FT_DEFAULTS_MAX 64
struct ft_key;
size_t ft__default_order(const struct ft_key *key, int needs, const ft_default_kernel **out, size_t cap);

#endif
