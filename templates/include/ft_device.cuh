// ft_device.cuh — device helpers every kernel family shares: integer types, infinities,
// shared-memory addresses, exp2, 16-bit packing, quad reductions.
//
// Part of the generated source: the generator writes this file's text in place of the
// #include line of a template (once per source), so a generated kernel still compiles on its
// own with NVRTC or nvcc. The dtype comes from the prelude: FTP_DTYPE_F16 or FTP_DTYPE_BF16.

namespace ft {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

#define NEG_INF __int_as_float(0xff800000)
#define POS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ u32 smem_addr(const void *p)
{
    return (u32)__cvta_generic_to_shared(p);
}

// 2^x with one MUFU.EX2: the .ftz form flushes subnormal results to zero, which the softmax
// never needs (a probability under 2^-126 is 0 at fp16 and bf16). exp2f without fast-math
// compiles to the subnormal-safe form, which costs extra instructions per score.
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Two floats to one 16-bit pair of the kernel's dtype, lo in the low half (the element of the
// lower column; cvt puts its first source in the high half).
__device__ __forceinline__ u32 pack2(float lo, float hi)
{
    u32 r;
#if defined(FTP_DTYPE_BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

// Maximum and sum over the four threads of a quad (the threads that share an accumulator row
// in the mma.sync and wgmma layouts).
__device__ __forceinline__ float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

} // namespace ft
