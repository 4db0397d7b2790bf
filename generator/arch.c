#include "arch.h"

#include <stdio.h>
#include <string.h>

/* CUDA C++ Programming Guide, "Technical Specifications per Compute Capability":
 * 8.0 (A100): 164 KB shared memory per SM, 163 KB opt-in per block, 2048 threads per SM;
 * 8.6/8.9: 100 KB per SM, 99 KB per block, 1536 threads per SM;
 * 9.0 (H100/H200): 228 KB per SM, 227 KB per block, 2048 threads per SM.
 * All: 64K 32-bit registers per SM and per block, 255 per thread, 1024 threads per block,
 * 1 KB of shared memory reserved per block. */
static const ft_arch builtin[] = {
    {"sm_80", 80, 0, 163 * 1024, 164 * 1024, 1024, 65536, 65536, 255, 1024, 2048, 0, ""},
    {"sm_86", 86, 0, 99 * 1024, 100 * 1024, 1024, 65536, 65536, 255, 1024, 1536, 0, ""},
    {"sm_89", 89, 0, 99 * 1024, 100 * 1024, 1024, 65536, 65536, 255, 1024, 1536, 0, ""},
    {"sm_90", 90, 0, 227 * 1024, 228 * 1024, 1024, 65536, 65536, 255, 1024, 2048, 0, ""},
    {"sm_90a", 90, 0, 227 * 1024, 228 * 1024, 1024, 65536, 65536, 255, 1024, 2048, 0, ""},
};

ft_status ft__arch_builtin(const char *name, ft_arch *out, ft_err *err)
{
    size_t i;

    for (i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        if (strcmp(builtin[i].name, name) == 0) {
            *out = builtin[i];
            return FT_OK;
        }
    }
    return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "unknown architecture '%s' (known: %s)", name,
                    ft__arch_known());
}

const char *ft__arch_known(void)
{
    return "sm_80, sm_86, sm_89, sm_90, sm_90a";
}
