// ft_bwd_pre.cuh — what the backward's preprocessing kernel computes in both families: per query
// row, D = rowsum(dO ∘ O) (fp32) and the forward's LSE times log2(e), for the main kernel's
// exp2-based softmax; and the 16-bit pair unpacking it needs. With grouped-query heads summed by
// atomics (gqa=atomic), the dK and dV sums' zeroing (pre) and conversion (post) too. Needs
// FTP_DTYPE_BF16 or FTP_DTYPE_F16, ft_device.cuh and ft_params_bwd.cuh.

namespace ft {

// A 16-bit pair to two floats (the low half first).
__device__ __forceinline__ float2 unpack2(u32 x)
{
    float lo, hi;
#if defined(FTP_DTYPE_BF16)
    lo = __uint_as_float(x << 16);
    hi = __uint_as_float(x & 0xffff0000u);
#else
    asm("{ .reg .f16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
        : "=f"(lo), "=f"(hi)
        : "r"(x));
#endif
    return make_float2(lo, hi);
}

// D and LSE·log2(e) of the BM query rows of block m of (batch, head), into dsum and lse2 at
// row0 (the block's first row in the workspace): LPR lanes per row (the power of two at or above
// the row's CPR 16-byte chunks; where CPR is not one, 48, 72, 80, 96, ..., the last LPR − CPR
// lanes add 0), one chunk of dO and O each, reduced with xor shuffles. Rows past the sequence
// get D = 0 and LSE = +inf (P = 0 there).
template <int BM, int CPR, int THREADS>
__device__ __forceinline__ void bwd_row_stats(const BwdParams &p, int m, int head, int batch, long long row0,
                                              float *dsum, float *lse2)
{
    constexpr int LPR = CPR <= 4 ? 4 : CPR <= 8 ? 8 : CPR <= 16 ? 16 : 32;
    constexpr int RPW = 32 / LPR; // rows per warp and pass
    static_assert(BM % RPW == 0, "whole passes of rows");
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int sub = lane / LPR, c = lane % LPR;
    const long long bh = (long long)batch * p.heads_q + head;
    const u16 *dout = (const u16 *)p.dout + batch * p.dout_batch_stride + head * p.dout_head_stride;
    const u16 *o = (const u16 *)p.o + batch * p.o_batch_stride + head * p.o_head_stride;

    for (int r = warp * RPW; r < BM; r += (THREADS / 32) * RPW) {
        const int row = r + sub;
        const int q_row = m * BM + row;
        float acc = 0.f;
        if (q_row < p.seqlen_q && c < CPR) {
            const uint4 a = *(const uint4 *)(dout + q_row * p.dout_row_stride + c * 8);
            const uint4 b = *(const uint4 *)(o + q_row * p.o_row_stride + c * 8);
            const u32 av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 x = unpack2(av[i]), y = unpack2(bv[i]);
                acc = fmaf(x.x, y.x, acc);
                acc = fmaf(x.y, y.y, acc);
            }
        }
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (c == 0) {
            const bool real = q_row < p.seqlen_q;
            dsum[row0 + row] = real ? acc : 0.f;
            lse2[row0 + row] = real ? p.lse[bh * p.seqlen_q + q_row] * 1.4426950408889634f : POS_INF;
        }
    }
}

// This block's share [begin, end) of n items spread over the whole grid in equal runs.
__device__ __forceinline__ void bwd_block_share(long long n, long long &begin, long long &end)
{
    const long long blocks = (long long)gridDim.x * gridDim.y * gridDim.z;
    const long long id = blockIdx.x + gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
    const long long per = (n + blocks - 1) / blocks;
    begin = id * per;
    end = min(n, begin + per);
}

// gqa=atomic: the n4 float4s of the dK and dV sums from `sums` on (adjacent), zeroed by the pre
// kernel's blocks, each its share.
template <int THREADS>
__device__ __forceinline__ void bwd_zero_kv_sums(float *sums, long long n4)
{
    long long begin, end;
    bwd_block_share(n4, begin, end);
    float4 *z = (float4 *)sums;
    for (long long i = begin + (int)threadIdx.x; i < end; i += THREADS)
        z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// gqa=atomic: `valid` key rows of the dK and dV sums from dk_sum and dv_sum on (W floats a row,
// the tiles' width) to dk and dv (the element type, their row strides), CPR 16-byte chunks a row,
// by the post kernel's block.
template <int W, int CPR, int THREADS>
__device__ __forceinline__ void bwd_store_kv_sums(const BwdParams &p, const float *dk_sum, const float *dv_sum, u16 *dk,
                                                  u16 *dv, int valid)
{
    for (int i = (int)threadIdx.x; i < valid * CPR; i += THREADS) {
        const int row = i / CPR, c = i % CPR;
        const float4 *a = (const float4 *)(dk_sum + row * W + c * 8);
        const float4 *b = (const float4 *)(dv_sum + row * W + c * 8);
        const float4 a0 = a[0], a1 = a[1], b0 = b[0], b1 = b[1];
        *(uint4 *)(dk + row * p.dk_row_stride + c * 8) =
            make_uint4(pack2(a0.x, a0.y), pack2(a0.z, a0.w), pack2(a1.x, a1.y), pack2(a1.z, a1.w));
        *(uint4 *)(dv + row * p.dv_row_stride + c * 8) =
            make_uint4(pack2(b0.x, b0.y), pack2(b0.z, b0.w), pack2(b1.x, b1.y), pack2(b1.z, b1.w));
    }
}

} // namespace ft
