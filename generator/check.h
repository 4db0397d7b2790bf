/* What a compiled kernel must be before anyone loads it (a pack's, a kernel set's, a
 * database's winner): checks that need no driver and no database. */
#ifndef FT_GENERATOR_CHECK_H
#define FT_GENERATOR_CHECK_H

#include <stddef.h>

/* Each returns 1, or 0 with a phrase saying what is wrong in why (cap bytes). They read only
 * what they are given, whatever it holds: the cubin's ELF structures are bounds-checked. */

/* The SM a cubin's ELF header says it is for (90 for sm_90 and sm_90a), or 0: not an ELF
 * image, not a CUDA one, or of a CUDA ELF ABI this build does not know. */
int ft__cubin_sm(const void *cubin, size_t size, char *why, size_t cap);

/* Whether a cubin is an ELF image for exactly the SM of compute capability cc (flashtune builds
 * every kernel for the device's own target) whose symbol table defines entry. */
int ft__cubin_check(const void *cubin, size_t size, int cc, const char *entry, char *why, size_t cap);

/* ft__cubin_check, and that the cubin defines every other kernel the family's sources define
 * (the entry followed by each of its suffixes: the backward's _pre and _post). For a family
 * this build does not know, the entry alone. */
int ft__family_cubin_check(const char *family, const void *cubin, size_t size, int cc, const char *entry, char *why,
                           size_t cap);

/* Whether arch is the target flashtune builds the family for on compute capability cc
 * ("sm_90" for flash_fwd_sm80 on 9.0, "sm_90a" for flash_fwd_sm90) and the family runs there;
 * for a family this build does not know, "sm_<cc>" with at most one letter after it. */
int ft__kernel_target_check(const char *family, const char *arch, int cc, char *why, size_t cap);

#endif
