// reference — plain, obviously-correct kernels that verification compares against, and a
// random-number fill. Compiled once per architecture with NVRTC; no header is included.
//
// ft_ref_attention also writes, per output element, mag = sum_j p_j |v_j| / sum_j p_j. A kernel
// that rounds P to 16 bits before P·V (every flash kernel does) errs by up to half an ulp of each
// p_j times |v_j|: in a row that sees few keys, or whose terms cancel, that error is large next
// to |o| itself but never next to mag, so error bounds are stated against both.
//
// ft_ref_attention computes attention in fp32 with the same contract as the flash kernels
// (layouts, strides, grouped-query heads, bottom-right causal mask, O = 0 and LSE = +inf for
// a row that sees no key), one thread block per (query row, head, batch), the row's scores
// held in shared memory: O(seqlen_k) memory per block, nothing clever.

namespace ftref {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Mirrored by runtime/reference.h.
struct RefParams {
    const void *q;
    const void *k;
    const void *v;
    float *o;   // fp32 output, its own strides below
    float *lse; // fp32 [batch, heads_q, seqlen_q]
    float *mag; // fp32, like o: sum_j p_j |v_j|, the scale of rounding errors in o (see below)
    long long q_batch_stride, q_row_stride, q_head_stride;
    long long k_batch_stride, k_row_stride, k_head_stride;
    long long v_batch_stride, v_row_stride, v_head_stride;
    long long o_batch_stride, o_row_stride, o_head_stride;
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    float scale;
    int causal;
    int bf16;
    int reserved;
};

__device__ __forceinline__ float to_float(u16 x, int bf16)
{
    if (bf16)
        return __uint_as_float((u32)x << 16);
    float f;
    asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x));
    return f;
}

__device__ __forceinline__ u16 from_float(float f, int bf16)
{
    u16 r;
    if (bf16)
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
    else
        asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; mov.b16 %0, h; }" : "=h"(r) : "f"(f));
    return r;
}

__device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// Reduces over the block; every thread gets the result. red holds 32 floats.
__device__ float block_reduce(float x, float *red, bool is_max)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    x = is_max ? warp_max(x) : warp_sum(x);
    __syncthreads();
    if (lane == 0)
        red[warp] = x;
    __syncthreads();
    x = lane < warps ? red[lane] : (is_max ? -__int_as_float(0x7f800000) : 0.f);
    return is_max ? warp_max(x) : warp_sum(x);
}

} // namespace ftref

// Dynamic shared memory: (head_dim + seqlen_k + 32) floats.
extern "C" __global__ void __launch_bounds__(256) ft_ref_attention(const ftref::RefParams p)
{
    using namespace ftref;
    extern __shared__ float sm[];
    float *qs = sm;
    float *s = sm + p.head_dim;
    float *red = s + p.seqlen_k;
    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.heads_q / p.heads_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    const int d = p.head_dim;

    const u16 *q = (const u16 *)p.q + batch * p.q_batch_stride + head * p.q_head_stride + row * p.q_row_stride;
    const u16 *k = (const u16 *)p.k + batch * p.k_batch_stride + kv_head * p.k_head_stride;
    const u16 *v = (const u16 *)p.v + batch * p.v_batch_stride + kv_head * p.v_head_stride;
    float *o = p.o + batch * p.o_batch_stride + head * p.o_head_stride + row * p.o_row_stride;
    float *mag = p.mag + batch * p.o_batch_stride + head * p.o_head_stride + row * p.o_row_stride;
    float *lse = p.lse + ((long long)batch * p.heads_q + head) * p.seqlen_q + row;

    int limit = p.seqlen_k; // keys 0 .. limit-1 are visible
    if (p.causal)
        limit = min(limit, row + p.seqlen_k - p.seqlen_q + 1);
    if (limit <= 0) {
        for (int i = tid; i < d; i += blockDim.x)
            o[i] = mag[i] = 0.f;
        if (tid == 0)
            *lse = __int_as_float(0x7f800000);
        return;
    }
    for (int i = tid; i < d; i += blockDim.x)
        qs[i] = to_float(q[i], p.bf16);
    __syncthreads();

    // Scores: one warp per key, lanes across the head dimension.
    for (int j = warp; j < limit; j += warps) {
        const u16 *kj = k + j * p.k_row_stride;
        float acc = 0.f;
        for (int i = lane; i < d; i += 32)
            acc += qs[i] * to_float(kj[i], p.bf16);
        acc = warp_sum(acc);
        if (lane == 0)
            s[j] = acc * p.scale;
    }
    __syncthreads();

    float mx = -__int_as_float(0x7f800000);
    for (int j = tid; j < limit; j += blockDim.x)
        mx = fmaxf(mx, s[j]);
    mx = block_reduce(mx, red, true);
    float sum = 0.f;
    for (int j = tid; j < limit; j += blockDim.x) {
        float e = expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, red, false); // also orders the writes to s before the reads below

    for (int i = tid; i < d; i += blockDim.x) {
        float acc = 0.f, abs_acc = 0.f;
        for (int j = 0; j < limit; ++j) {
            float x = to_float(v[j * p.v_row_stride + i], p.bf16);
            acc += s[j] * x;
            abs_acc += s[j] * fabsf(x);
        }
        o[i] = acc / sum;
        mag[i] = abs_acc / sum;
    }
    if (tid == 0)
        *lse = mx + logf(sum);
}

// Fills n 16-bit values with mean + stddev · N(0, 1), from a counter-based hash of (seed, i):
// the same seed gives the same tensor on any launch configuration.
extern "C" __global__ void ft_ref_fill_normal(unsigned short *out, long long n, unsigned long long seed,
                                              float mean, float stddev, int bf16)
{
    using namespace ftref;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        u64 h = seed ^ ((u64)i * 0x9E3779B97F4A7C15ull);
        h ^= h >> 30;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 27;
        h *= 0x94D049BB133111EBull;
        h ^= h >> 31;
        float u1 = ((float)(h >> 40) + 1.f) * (1.f / 16777217.f); // (0, 1]
        float u2 = (float)(h & 0xFFFFFFull) * (1.f / 16777216.f);  // [0, 1)
        float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
        out[i] = from_float(mean + stddev * z, bf16);
    }
}

// Compares a kernel's O (16-bit, [b, s, h, d] up to strides) and LSE with the fp32 reference
// (O contiguous [b, sq, hq, d]) and accumulates into stats (zeroed by the caller):
//   stats[0] sum (o - ref)^2     stats[1] sum ref^2 (unused here: the caller passes it)
//   stats[2] max |o - ref|       stats[3] max |o - ref| / bound
//   stats[4] max |lse - ref|     stats[5] non-finite outputs where the reference is finite
//   stats[6] elements over their bound (O and LSE)
// bound = rtol·|ref| + ptol·mag + atol_abs; a row whose reference LSE is +inf must be +inf.
// One thread per 8 elements of a row; blockIdx.y/z walk heads and batch.
__device__ __forceinline__ void atomic_max_pos(double *addr, double v)
{
    unsigned long long *a = (unsigned long long *)addr;
    unsigned long long old = *a;
    while (__longlong_as_double((long long)old) < v) {
        unsigned long long seen = atomicCAS(a, old, (unsigned long long)__double_as_longlong(v));
        if (seen == old)
            break;
        old = seen;
    }
}

extern "C" __global__ void __launch_bounds__(256) ft_ref_compare(const ftref::RefParams p, const unsigned short *o,
                                                                  long long ob, long long orow, long long oh,
                                                                  const float *lse, double rtol, double ptol,
                                                                  double atol_abs,
                                                                  double lse_abs, double lse_rel, double *stats)
{
    using namespace ftref;
    const int head = blockIdx.y, batch = blockIdx.z, d = p.head_dim;
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; // over rows × d/8
    const int per_row = d / 8;
    double sq = 0, worst_abs = 0, worst_ratio = 0, worst_lse = 0, nonfinite = 0, bad = 0;
    if (idx < (long long)p.seqlen_q * per_row) {
        const int row = (int)(idx / per_row), c0 = (int)(idx % per_row) * 8;
        const unsigned short *oi = o + batch * ob + row * orow + head * oh + c0;
        const long long ro = ((long long)(batch * p.seqlen_q + row) * p.heads_q + head) * d + c0;
        const float *ri = p.o + ro, *mi = p.mag + ro;
        for (int c = 0; c < 8; ++c) {
            double x = to_float(oi[c], p.bf16), r = ri[c];
            double diff = fabs(x - r), bound = rtol * fabs(r) + ptol * mi[c] + atol_abs;
            if (!isfinite(x)) {
                nonfinite += 1;
                continue;
            }
            sq += diff * diff;
            worst_abs = fmax(worst_abs, diff);
            worst_ratio = fmax(worst_ratio, diff / bound);
            if (diff > bound)
                bad += 1;
        }
        if (c0 == 0) {
            const long long li = ((long long)batch * p.heads_q + head) * p.seqlen_q + row;
            double x = lse[li], r = p.lse[li];
            if (isinf(r) && r > 0) {
                if (!(isinf(x) && x > 0))
                    bad += 1;
            } else if (!isfinite(x)) {
                nonfinite += 1;
            } else {
                worst_lse = fabs(x - r);
                if (worst_lse > lse_abs + lse_rel * fabs(r))
                    bad += 1;
            }
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, off);
        nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, off);
        bad += __shfl_xor_sync(0xffffffffu, bad, off);
        worst_abs = fmax(worst_abs, __shfl_xor_sync(0xffffffffu, worst_abs, off));
        worst_ratio = fmax(worst_ratio, __shfl_xor_sync(0xffffffffu, worst_ratio, off));
        worst_lse = fmax(worst_lse, __shfl_xor_sync(0xffffffffu, worst_lse, off));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&stats[0], sq);
        atomicAdd(&stats[5], nonfinite);
        atomicAdd(&stats[6], bad);
        atomic_max_pos(&stats[2], worst_abs);
        atomic_max_pos(&stats[3], worst_ratio);
        atomic_max_pos(&stats[4], worst_lse);
    }
}

// sum of squares of the fp32 reference O, into *out (zeroed by the caller).
extern "C" __global__ void ft_ref_sumsq(const float *x, long long n, double *out)
{
    double acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        acc += (double)x[i] * x[i];
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(out, acc);
}
