// ft_sched.cuh — the longest-first order in which flash_fwd_sm90's persistent CTAs take causal
// row blocks from a counter (balance=2). The idea is FlashAttention-3's dynamic causal scheduler
// (Dao-AILab/flash-attention hopper/tile_scheduler.hpp: a tile counter, heads in sections whose
// K and V fill 32 MB of L2, its sections rounded down to a power of two); written for this
// template, with sections of exactly as many pairs as fit.
//
// The (batch, head) pairs go in sections of consecutive ones whose K and V together fill at most
// FT_SECTION_L2_BYTES of L2 (the query heads of one K/V head share theirs); a section's blocks go
// longest first, its pairs in turn at each length (block k = 0 of each, then k = 1, ...), then the
// next section's. So the CTAs working at once read the K and V of one section, and the short
// blocks that end the kernel even out the CTAs' loads (bench/sched_model.py prices a
// longest-first order at 0.97-0.999 of a perfect balance on the papers' grid).
//
// Plain C as much as CUDA C++: the template includes it, and so does the CPU test
// (tests/test_sched.c), which checks that the order takes every block exactly once.

#ifndef FT_SCHED_CUH
#define FT_SCHED_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FT_SCHED_FN __device__ __forceinline__
#else
#define FT_SCHED_FN static inline
#endif

// The bytes of L2 a section's K and V may fill (the H100 has 50 MiB, the H200 60: the rest is
// left to the Q and O tiles streaming past).
#define FT_SECTION_L2_BYTES (32ll << 20)

// Pairs per section, from 1 to heads (the pairs of the batch): as many as fill
// FT_SECTION_L2_BYTES with the K and V of seqlen_k keys of tile_d 16-bit columns each, `group`
// query heads sharing one K/V head's.
FT_SCHED_FN int ft_sched_section(int heads, int group, int seqlen_k, int tile_d)
{
    const long long kv = (long long)(seqlen_k > 1 ? seqlen_k : 1) * tile_d * 4;
    const long long fit = FT_SECTION_L2_BYTES * group / kv;
    return fit < 1 ? 1 : fit > heads ? heads : (int)fit;
}

// The block at position idx (0 <= idx < heads·m) of the order, as pair·m + k (k = 0 the pair's
// longest block, m blocks a pair), with sections of sect pairs (the last may have fewer).
FT_SCHED_FN int ft_sched_item(int idx, int m, int heads, int sect)
{
    const int sec = idx / (sect * m), r = idx - sec * sect * m;
    const int n = heads - sec * sect < sect ? heads - sec * sect : sect;
    return (sec * sect + r % n) * m + r / n;
}

#endif
