/* Variants of a spec: enumeration, the variant string, parameter access. */
#ifndef FT_GENERATOR_VARIANT_H
#define FT_GENERATOR_VARIANT_H

#include <stddef.h>

#include "generator/spec.h"

/* The n-th variant of the space, n in [0, spec->nvariants): mixed-radix over the parameters,
 * the last parameter changing fastest. */
void ft__variant_nth(const ft_spec *spec, long long n, ft_variant *out);

/* "d=128,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16": every parameter in spec order.
 * Returns the length written (excluding the NUL), truncating at cap. */
size_t ft__variant_format(const ft_spec *spec, const ft_variant *v, char *buf, size_t cap);

/* Parses a variant string: comma-separated name=value pairs, in any order, each parameter
 * at most once, each value one the spec lists; a parameter with a `default` may be left out
 * (it takes the default: text written before a knob joined the spec means the same kernel),
 * any other must be there. Spaces around items are ignored. */
ft_status ft__variant_parse(const ft_spec *spec, const char *text, ft_variant *out, ft_err *err);

/* Whether a partial assignment ("d=128,causal=1", as in --only) matches v. The filter is
 * checked against the spec like a variant string, except that parameters may be missing. */
ft_status ft__variant_filter_parse(const ft_spec *spec, const char *text, ft_variant *out,
                                   unsigned *mask, ft_err *err);
int ft__variant_matches(const ft_variant *v, const ft_variant *filter, unsigned mask);

/* Value of an integer parameter, or fallback when the spec has no parameter of that name
 * (or it is a string parameter). */
long long ft__variant_int(const ft_spec *spec, const ft_variant *v, const char *name,
                          long long fallback);
/* Value of a string parameter, or NULL. */
const char *ft__variant_str(const ft_spec *spec, const ft_variant *v, const char *name);

/* ---- variant strings as text (what packs and database rows hold; no spec needed) ---------- */

/* The value of parameter name in a variant string, copied to out (cap bytes): 1 when found, 0
 * when the string has no such parameter, -1 when it is not a well-formed variant string
 * (ft__variant_check's rules) or the value does not fit. */
int ft__variant_text_value(const char *variant, const char *name, char *out, size_t cap);

/* The element type a text names, as specs name it: "f16" for f16, fp16, float16 or half, "bf16"
 * for bf16 or bfloat16 (what a variant's dtype and the CLI's --dtype accept), else NULL. */
const char *ft__dtype_name(const char *text);

/* Whether a variant string is well formed — comma-separated name=value pairs, names of letters,
 * digits and '_' not starting with a digit, values of letters, digits, '_', '.' and '-', no name
 * twice, under 512 bytes — and computes the bucket: its d, causal and dtype equal head_dim,
 * causal and dtype, its det (0 when it has none: the forward, a family without deterministic
 * kernels) equals det (the bucket key's, 0 when the key has none); and when rows_per_block > 0,
 * its bm (64 when it has none, as the loader reads it) equals rows_per_block. */
int ft__variant_check(const char *variant, const char *dtype, int head_dim, int causal, int det, int rows_per_block,
                      char *why, size_t cap);

#endif
