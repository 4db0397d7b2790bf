// One variant of the backward template for the harness. Compiled once per variant after a
// prelude (written by run.sh) that defines the FTP_ parameters, FT_SMEM_BYTES and FTV_ENTRY,
// the kernels' name: the same source the generator would produce, plus a registration.
#include <stddef.h>

#include "variant.h"

#include "../../templates/flash_bwd_sm80.cuh"

#ifndef FTV_ENTRY
#error "variant.cu needs FTV_ENTRY"
#endif

// FT_DEFINE_KERNEL pastes _pre and _post onto its argument, so the name must arrive expanded.
#define FTV_DEFINE(name) FT_DEFINE_KERNEL(name)
#define FTV_CAT2(a, b) a##b
#define FTV_CAT(a, b) FTV_CAT2(a, b)
#define FTV_STR2(a) #a
#define FTV_STR(a) FTV_STR2(a)

FTV_DEFINE(FTV_ENTRY)

static const BwdVariant ftv_info = {
    FTV_STR(FTV_ENTRY),
    (const void *)FTV_CAT(FTV_ENTRY, _pre),
    (const void *)FTV_ENTRY,
    (const void *)FTV_CAT(FTV_ENTRY, _post),
    ft::D, ft::BM, ft::BN, ft::WARPS, ft::SPLIT, ft::STAGES, ft::CAUSAL ? 1 : 0, ft::BF16 ? 1 : 0,
    ft::GQA_ATOMIC ? 1 : 0, ft::DET ? 1 : 0, ft::THREADS, FT_SMEM_BYTES, sizeof(ft::BwdParams),
    offsetof(ft::BwdParams, reserved),
};

static const int ftv_registered = bwd_register(&ftv_info);
