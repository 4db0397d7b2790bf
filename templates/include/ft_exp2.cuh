// ft_exp2.cuh — 2^x on the FMA pipe, for a share of the softmax's exponentials.
//
// The softmax computes one exponential per score; at small head dims that is as much work for
// the multi-function unit (MUFU.EX2, a quarter of the FMA pipe's lanes) as the scores are for the
// tensor cores (H100/H200: about 3.9 T exponentials a second against 989 TFLOP/s of dense
// 16-bit matrix products; at d = 64 a score costs 256 FLOPs of Q·Kᵀ and P·V, so both run out
// together). Computing some of the exponentials with FMAs instead (FlashAttention-4 does on its
// newer GPUs) lightens that unit at the cost of issue slots: ft_exp2_poly is 3 FADD, 4 FFMA, a
// shift and an add and a select. Which share pays is a knob (flash_fwd_sm90's pexp), measured.
//
// 2^x = 2^n · 2^f with n = x rounded to the nearest integer (adding 1.5·2^23 rounds it; the
// integer is then the low bits of the sum's pattern, and n << 23 is the sum's pattern shifted
// left by 23, the rest shifting out) and f = x − n in [−0.5, 0.5]; 2^f by a degree-4 polynomial
// fitted to the relative error on that interval (Lawson's iteration towards the minimax fit,
// numpy, float64; 2.6e-6 at most there, 2.7e-6 evaluated in fp32 with FMAs), and 2^n added to
// the exponent field. Below −126 the result is exactly 0 (as MUFU's ex2.approx.ftz gives for
// −inf, the masked scores: a row that sees no key must keep a zero sum). Arguments are the
// softmax's, at most 0 up to rounding; nothing above 127 is handled.
//
// Plain C as much as CUDA C++: the device templates include it, and so does the CPU test
// (tests/test_exp2.c), which checks this very code against exp2.

#ifndef FT_EXP2_CUH
#define FT_EXP2_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FT_EXP2_FN __device__ __forceinline__
#define FT_EXP2_BITS(f) __float_as_uint(f)
#define FT_EXP2_FLOAT(u) __uint_as_float(u)
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define FT_EXP2_FN static inline
static inline uint32_t ft_exp2_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float ft_exp2_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#define FT_EXP2_BITS(f) ft_exp2_bits(f)
#define FT_EXP2_FLOAT(u) ft_exp2_float(u)
#endif

FT_EXP2_FN float ft_exp2_poly(float x)
{
    const float round = 12582912.0f; // 1.5 · 2^23: x + round has n in its low mantissa bits
    const float t = x + round;
    const float n = t - round;
    const float f = x - n;
    float p = fmaf(0.009570079855620861f, f, 0.05591783672571182f);
    p = fmaf(p, f, 0.240247443318367f);
    p = fmaf(p, f, 0.6931217908859253f);
    p = fmaf(p, f, 0.9999992847442627f);
    const float y = FT_EXP2_FLOAT(FT_EXP2_BITS(p) + (FT_EXP2_BITS(t) << 23));
    return x < -126.0f ? 0.0f : y;
}

#endif
