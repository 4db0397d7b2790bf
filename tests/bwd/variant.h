/* One compiled variant of templates/flash_bwd_sm80.cuh as the harness sees it: its three
 * kernels and its compile-time parameters. Each variant is its own translation unit
 * (variant.cu with a generated prelude) that registers itself before main runs. */
#ifndef FT_TESTS_BWD_VARIANT_H
#define FT_TESTS_BWD_VARIANT_H

#include <stddef.h>

struct BwdVariant {
    const char *entry; /* the main kernel's name; the others add _pre and _post */
    const void *pre, *main, *post;
    int d, bm, bn, warps, split, stages, causal, bf16, gqa_atomic, det;
    int threads;
    long long smem;      /* the main kernel's dynamic shared memory */
    size_t params_size;  /* sizeof(ft::BwdParams), checked against the harness's mirror */
    size_t params_reserved_offset;
};

/* Adds v to the harness's list; returns the number registered so far. */
int bwd_register(const BwdVariant *v);

#endif
