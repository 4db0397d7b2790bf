/* Source generation: one CUDA translation unit per variant. */
#ifndef FT_GENERATOR_EMIT_H
#define FT_GENERATOR_EMIT_H

#include "common/error.h"
#include "generator/arch.h"
#include "generator/family.h"
#include "generator/spec.h"

/* Bumped whenever the generated text changes shape; part of every source, hence of every
 * cache key and every kernel hash. */
#define FT_GENERATOR_VERSION 2 /* 2: the header no longer names the spec's path */

typedef struct ft_kernel_source {
    char *text;               /* the translation unit; malloc'd */
    char entry[FT_ENTRY_MAX];  /* extern "C" kernel name: ft_<family>_<name><value>... */
    char variant[FT_VARIANT_STR_MAX]; /* the variant string */
    long long smem_dynamic;   /* bytes of dynamic shared memory to launch with */
    int threads;              /* threads per block */
    char template_hash[65];   /* sha256 of the template file and the generator version */
} ft_kernel_source;

/* Generates the source of one variant: a header comment naming variant and template (not the
 * spec: the same variant gives the same text whatever file or name it came from);
 * one #define per parameter (FTP_<NAME> for integers, FTP_<NAME>_<VALUE> for names);
 * FT_SMEM_BYTES from the spec's smem formula; the template; the entry point.
 * The text compiles on its own (nvcc -arch=sm_80 or newer, or NVRTC). */
ft_status ft__emit(ft_spec *spec, const ft_family *fam, const ft_variant *v, const ft_arch *arch,
                   ft_kernel_source *out, ft_err *err);
void ft__kernel_source_free(ft_kernel_source *ks); /* frees text; NULL is a no-op */

/* sha256 over a family's template text and FT_GENERATOR_VERSION, as 64 hex digits. */
void ft__family_hash(const ft_family *fam, char out[65]);

#endif
