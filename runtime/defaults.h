/* The kernels the runtime builds when neither a kernel set, a pack nor a database has a winner
 * for a call (runtime/defaults.c says how each was chosen). */
#ifndef FT_RUNTIME_DEFAULTS_H
#define FT_RUNTIME_DEFAULTS_H

#include <stddef.h>

typedef struct ft_default_kernel {
    const char *family;  /* ft__family_find's name */
    int head_dim;
    int causal;          /* 0 or 1, or -1: either */
    const char *variant; /* partial: the call's d, causal, det and dtype complete it */
} ft_default_kernel;

/* Every entry, in the order the runtime tries them (the first that builds wins); *n: how many. */
const ft_default_kernel *ft__default_kernels(size_t *n);

#endif
