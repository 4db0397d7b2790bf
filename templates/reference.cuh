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
// held in shared memory (or, for rows too long for it, in global memory the caller gives):
// O(seqlen_k) memory per block, nothing clever.

namespace ftref {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Mirrored by runtime/verify.c (ref_params).
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
    float *scores; // NULL: each row's scores in shared memory; else [batch][heads_q][seqlen_q][seqlen_k]
    const int *seqused_k; // NULL: seqlen_k keys per sequence; else sequence b's first seqused_k[b]
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

// Dynamic shared memory: (head_dim + seqlen_k + 32) floats, or (head_dim + 32) with p.scores.
extern "C" __global__ void __launch_bounds__(256) ft_ref_attention(const ftref::RefParams p)
{
    using namespace ftref;
    extern __shared__ float sm[];
    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    float *qs = sm;
    float *s = p.scores ? p.scores + (((long long)batch * p.heads_q + head) * p.seqlen_q + row) * p.seqlen_k
                        : sm + p.head_dim;
    float *red = sm + p.head_dim + (p.scores ? 0 : p.seqlen_k);
    const int kv_head = head / (p.heads_q / p.heads_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    const int d = p.head_dim;

    const u16 *q = (const u16 *)p.q + batch * p.q_batch_stride + head * p.q_head_stride + row * p.q_row_stride;
    const u16 *k = (const u16 *)p.k + batch * p.k_batch_stride + kv_head * p.k_head_stride;
    const u16 *v = (const u16 *)p.v + batch * p.v_batch_stride + kv_head * p.v_head_stride;
    float *o = p.o + batch * p.o_batch_stride + head * p.o_head_stride + row * p.o_row_stride;
    float *mag = p.mag + batch * p.o_batch_stride + head * p.o_head_stride + row * p.o_row_stride;
    float *lse = p.lse + ((long long)batch * p.heads_q + head) * p.seqlen_q + row;

    const int sk = p.seqused_k ? max(0, min(p.seqlen_k, p.seqused_k[batch])) : p.seqlen_k;
    int limit = sk; // keys 0 .. limit-1 are visible
    if (p.causal)
        limit = min(limit, row + sk - p.seqlen_q + 1);
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

// ---- backward ----------------------------------------------------------------------------------
// The reference for the backward kernels (templates/flash_bwd_sm80.cuh): given the same inputs
// as they are — Q, K, V, the forward's O (16-bit) and LSE, and dO — it evaluates
//   P = exp(scale·q·k − LSE),  dP = dO·v,  D = rowsum(dO ∘ O),  dS = P·(dP − D),
//   dQ = scale·Σ_j dS·k_j,  dK = scale·Σ_i dS·q_i (over the group's query heads),  dV = Σ_i P·dO_i
// in fp32, one score at a time, with the score's dot product in fp64: with scores in the
// hundreds an fp32 dot product is off by up to about 10⁻³ absolute, which exp() turns into a
// relative error of P of that size, as large as the fp16 kernels' own rounding. It also writes,
// per output element, the sum of the absolute values of its terms, the scale of the rounding
// errors a flash kernel makes (it rounds P and dS to 16 bits before the products):
//   mag_dv = Σ_i P |dO_i|,  mag_dk = scale·Σ_i |dS| |q_i|,  mag_dq = scale·Σ_j |dS| |k_j|,
// and for dQ and dK the scale of the fp32 rounding in dP − D, which cancels where the softmax is
// saturated or a row sees one key (dS is then far smaller than the fp32 error of either term);
// each is a sum of d products, whose rounding scales with the sum of the products' magnitudes,
// |dP|₁ = Σ_c |dO_c v_c| and |D|₁ = Σ_c |dO_c O_c| (not with |dP| and |D|, which can cancel
// to far less):
//   cmag_dk = scale·Σ_i P (|dP|₁ + |D|₁) |q_i|,  cmag_dq = scale·Σ_j P (|dP|₁ + |D|₁) |k_j|.
// A row that sees no key (LSE = +inf) contributes nothing and gets dQ = 0.
// Kernels, in launch order: ft_ref_bwd_dsum (D), then ft_ref_bwd_dq and ft_ref_bwd_dkv in any
// order; ft_ref_bwd_compare compares one gradient of a kernel with the reference.

namespace ftref {

// Mirrored by runtime/verify_bwd.c (ref_bwd_params).
struct RefBwdParams {
    const void *q;
    const void *k;
    const void *v;
    const void *o;
    const void *dout;
    const float *lse; // [batch, heads_q, seqlen_q]
    float *dsum;      // [batch, heads_q, seqlen_q]: D, written by ft_ref_bwd_dsum
    float *dsum_abs;  // [batch, heads_q, seqlen_q]: |D|₁ = Σ|dO ∘ O|, written by ft_ref_bwd_dsum
    float *dq;        // fp32 [batch, seqlen_q, heads_q, head_dim], contiguous
    float *dk;        // fp32 [batch, seqlen_k, heads_kv, head_dim], contiguous
    float *dv;
    float *mag_dq;    // like dq
    float *mag_dk;    // like dk
    float *mag_dv;
    float *cmag_dq;   // like dq
    float *cmag_dk;   // like dk
    long long q_batch_stride, q_row_stride, q_head_stride;
    long long k_batch_stride, k_row_stride, k_head_stride;
    long long v_batch_stride, v_row_stride, v_head_stride;
    long long o_batch_stride, o_row_stride, o_head_stride;
    long long dout_batch_stride, dout_row_stride, dout_head_stride;
    // head_dim: at most 256 (eight elements a lane), a multiple of 8 (ft_ref_bwd_compare reads
    // eight a thread); runtime/verify_bwd.c passes the kernels' multiples of 8 from 32 to 256.
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    float scale;
    int causal;
    int bf16;
    int reserved;
};

__device__ __forceinline__ double warp_sum_f64(double x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

} // namespace ftref

// D = rowsum(dO ∘ O), one warp per (query row, head, batch): grid (seqlen_q, heads_q, batch), 32 threads.
extern "C" __global__ void __launch_bounds__(32) ft_ref_bwd_dsum(const ftref::RefBwdParams p)
{
    using namespace ftref;
    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z, lane = threadIdx.x;
    const u16 *dout = (const u16 *)p.dout + batch * p.dout_batch_stride + head * p.dout_head_stride +
                      row * p.dout_row_stride;
    const u16 *o = (const u16 *)p.o + batch * p.o_batch_stride + head * p.o_head_stride + row * p.o_row_stride;
    float acc = 0.f, abs_acc = 0.f;
    for (int c = lane; c < p.head_dim; c += 32) {
        const float x = to_float(dout[c], p.bf16) * to_float(o[c], p.bf16);
        acc += x;
        abs_acc += fabsf(x);
    }
    acc = warp_sum(acc);
    abs_acc = warp_sum(abs_acc);
    if (lane == 0) {
        const long long at = ((long long)batch * p.heads_q + head) * p.seqlen_q + row;
        p.dsum[at] = acc;
        p.dsum_abs[at] = abs_acc;
    }
}

// dQ of one query row: grid (seqlen_q, heads_q, batch), 256 threads. One warp per key (lanes
// across the head dimension, lane c holding elements c, c + 32, ... below head_dim: per_lane of
// them, which differs between lanes where head_dim is not a multiple of 32 — at 80 lanes 0–15
// hold three, 16–31 two), the warps' partial sums added in shared memory at the end.
extern "C" __global__ void __launch_bounds__(256) ft_ref_bwd_dq(const ftref::RefBwdParams p)
{
    using namespace ftref;
    constexpr int WARPS = 8, R = 8; // R: the most elements a lane holds, 256 / 32
    __shared__ float red[3][WARPS][256];
    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / (p.heads_q / p.heads_kv);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int d = p.head_dim, per_lane = (d - lane + 31) / 32; // elements lane + 32·r < d
    const u16 *q = (const u16 *)p.q + batch * p.q_batch_stride + head * p.q_head_stride + row * p.q_row_stride;
    const u16 *dout = (const u16 *)p.dout + batch * p.dout_batch_stride + head * p.dout_head_stride +
                      row * p.dout_row_stride;
    const u16 *k = (const u16 *)p.k + batch * p.k_batch_stride + kv_head * p.k_head_stride;
    const u16 *v = (const u16 *)p.v + batch * p.v_batch_stride + kv_head * p.v_head_stride;
    const long long stat = ((long long)batch * p.heads_q + head) * p.seqlen_q + row;
    const float lse = p.lse[stat], dsum = p.dsum[stat], dsum_abs = p.dsum_abs[stat];

    int limit = p.seqlen_k; // keys 0 .. limit-1 are visible
    if (p.causal)
        limit = min(limit, row + p.seqlen_k - p.seqlen_q + 1);
    if (!(lse < __int_as_float(0x7f800000))) // +inf (no key) or NaN: nothing to add
        limit = 0;

    float qv[R], dov[R], acc[R], mag[R], cmag[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int c = lane + 32 * r;
        qv[r] = r < per_lane ? to_float(q[c], p.bf16) : 0.f;
        dov[r] = r < per_lane ? to_float(dout[c], p.bf16) : 0.f;
        acc[r] = mag[r] = cmag[r] = 0.f;
    }
    for (int j = warp; j < limit; j += WARPS) {
        const u16 *kj = k + j * p.k_row_stride, *vj = v + j * p.v_row_stride;
        double s = 0;
        float dp = 0.f, dp_abs = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (r >= per_lane)
                break;
            const int c = lane + 32 * r;
            const float x = dov[r] * to_float(vj[c], p.bf16);
            s += (double)qv[r] * to_float(kj[c], p.bf16);
            dp += x;
            dp_abs += fabsf(x);
        }
        s = warp_sum_f64(s);
        dp = warp_sum(dp);
        dp_abs = warp_sum(dp_abs);
        const float pj = expf((float)(s * p.scale - lse));
        const float ds = pj * (dp - dsum);
        const float cs = pj * (dp_abs + dsum_abs);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (r >= per_lane)
                break;
            const float x = to_float(kj[lane + 32 * r], p.bf16);
            acc[r] += ds * x;
            mag[r] += fabsf(ds) * fabsf(x);
            cmag[r] += cs * fabsf(x);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (r >= per_lane)
            break;
        red[0][warp][lane + 32 * r] = acc[r];
        red[1][warp][lane + 32 * r] = mag[r];
        red[2][warp][lane + 32 * r] = cmag[r];
    }
    __syncthreads();
    const long long out = (((long long)batch * p.seqlen_q + row) * p.heads_q + head) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float a = 0.f, m = 0.f, cm = 0.f;
        for (int w = 0; w < WARPS; ++w) {
            a += red[0][w][c];
            m += red[1][w][c];
            cm += red[2][w][c];
        }
        p.dq[out + c] = p.scale * a;
        p.mag_dq[out + c] = p.scale * m;
        p.cmag_dq[out + c] = p.scale * cm;
    }
}

// dK and dV of one key row: grid (seqlen_k, heads_kv, batch), 256 threads. One warp per (query
// head of the group, query row that sees the key), lanes across the head dimension as above.
extern "C" __global__ void __launch_bounds__(256) ft_ref_bwd_dkv(const ftref::RefBwdParams p)
{
    using namespace ftref;
    constexpr int WARPS = 8, R = 8;
    __shared__ float red[5][WARPS][256];
    const int key = blockIdx.x, kv_head = blockIdx.y, batch = blockIdx.z;
    const int group = p.heads_q / p.heads_kv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int d = p.head_dim, per_lane = (d - lane + 31) / 32; // elements lane + 32·r < d
    const u16 *kj = (const u16 *)p.k + batch * p.k_batch_stride + kv_head * p.k_head_stride + key * p.k_row_stride;
    const u16 *vj = (const u16 *)p.v + batch * p.v_batch_stride + kv_head * p.v_head_stride + key * p.v_row_stride;

    // Rows i >= first see the key (causal: key <= i + seqlen_k - seqlen_q).
    const int first = p.causal ? max(0, key - (p.seqlen_k - p.seqlen_q)) : 0;
    const int rows = max(0, p.seqlen_q - first);

    float kv[R], vv[R], dk[R], dv[R], mk[R], mv[R], ck[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int c = lane + 32 * r;
        kv[r] = r < per_lane ? to_float(kj[c], p.bf16) : 0.f;
        vv[r] = r < per_lane ? to_float(vj[c], p.bf16) : 0.f;
        dk[r] = dv[r] = mk[r] = mv[r] = ck[r] = 0.f;
    }
    for (long long idx = warp; idx < (long long)group * rows; idx += WARPS) {
        const int head = kv_head * group + (int)(idx / rows);
        const int row = first + (int)(idx % rows);
        const long long stat = ((long long)batch * p.heads_q + head) * p.seqlen_q + row;
        const float lse = p.lse[stat];
        if (!(lse < __int_as_float(0x7f800000)))
            continue;
        const u16 *qi = (const u16 *)p.q + batch * p.q_batch_stride + head * p.q_head_stride + row * p.q_row_stride;
        const u16 *doi = (const u16 *)p.dout + batch * p.dout_batch_stride + head * p.dout_head_stride +
                         row * p.dout_row_stride;
        float qf[R], df[R];
        double s = 0;
        float dp = 0.f, dp_abs = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (r >= per_lane)
                break;
            const int c = lane + 32 * r;
            qf[r] = to_float(qi[c], p.bf16);
            df[r] = to_float(doi[c], p.bf16);
            s += (double)qf[r] * kv[r];
            dp += df[r] * vv[r];
            dp_abs += fabsf(df[r] * vv[r]);
        }
        s = warp_sum_f64(s);
        dp = warp_sum(dp);
        dp_abs = warp_sum(dp_abs);
        const float pij = expf((float)(s * p.scale - lse));
        const float dsum = p.dsum[stat];
        const float ds = pij * (dp - dsum);
        const float cs = pij * (dp_abs + p.dsum_abs[stat]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (r >= per_lane)
                break;
            dv[r] += pij * df[r];
            mv[r] += pij * fabsf(df[r]);
            dk[r] += ds * qf[r];
            mk[r] += fabsf(ds) * fabsf(qf[r]);
            ck[r] += cs * fabsf(qf[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
        if (r >= per_lane)
            break;
        const int c = lane + 32 * r;
        red[0][warp][c] = dk[r];
        red[1][warp][c] = mk[r];
        red[2][warp][c] = dv[r];
        red[3][warp][c] = mv[r];
        red[4][warp][c] = ck[r];
    }
    __syncthreads();
    const long long out = (((long long)batch * p.seqlen_k + key) * p.heads_kv + kv_head) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float a[5] = {0.f, 0.f, 0.f, 0.f, 0.f};
        for (int w = 0; w < WARPS; ++w)
            for (int i = 0; i < 5; ++i)
                a[i] += red[i][w][c];
        p.dk[out + c] = p.scale * a[0];
        p.mag_dk[out + c] = p.scale * a[1];
        p.dv[out + c] = a[2];
        p.mag_dv[out + c] = a[3];
        p.cmag_dk[out + c] = p.scale * a[4];
    }
}

// Compares one gradient x (16-bit, [batch, rows, heads, d] up to its strides) with the fp32
// reference ref, its mag and cmag (contiguous [batch, rows, heads, d]; cmag may be null, for
// dV); accumulates into stats (zeroed by the caller):
//   stats[0] sum (x - ref)^2       stats[1] max |x - ref|       stats[2] max |x - ref| / bound
//   stats[3] non-finite x          stats[4] elements over their bound (non-finite ones included)
//   stats[5] non-zero x in rows 0 .. empty_rows-1 (rows that see no key must give exactly 0)
// bound = rtol·|ref| + ptol·mag + ctol·cmag + atol_abs. One thread per 8 elements of a row;
// blockIdx.y and blockIdx.z walk heads and batch.
extern "C" __global__ void __launch_bounds__(256)
    ft_ref_bwd_compare(const unsigned short *x, long long xb, long long xr, long long xh, const float *ref,
                       const float *mag, const float *cmag, int rows, int heads, int d, int bf16, int empty_rows,
                       double rtol, double ptol, double ctol, double atol_abs, double *stats)
{
    using namespace ftref;
    const int head = blockIdx.y, batch = blockIdx.z;
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; // over rows × d/8
    const int per_row = d / 8;
    double sq = 0, worst_abs = 0, worst_ratio = 0, nonfinite = 0, bad = 0, nonzero = 0;
    if (idx < (long long)rows * per_row) {
        const int row = (int)(idx / per_row), c0 = (int)(idx % per_row) * 8;
        const unsigned short *xi = x + batch * xb + row * xr + head * xh + c0;
        const long long ro = ((long long)(batch * (long long)rows + row) * heads + head) * d + c0;
        for (int c = 0; c < 8; ++c) {
            const double v = to_float(xi[c], bf16), r = ref[ro + c];
            const double cm = cmag ? cmag[ro + c] : 0.0;
            const double diff = fabs(v - r), bound = rtol * fabs(r) + ptol * mag[ro + c] + ctol * cm + atol_abs;
            if (row < empty_rows && v != 0.0)
                nonzero += 1;
            if (!isfinite(v)) {
                nonfinite += 1;
                bad += 1;
                continue;
            }
            sq += diff * diff;
            worst_abs = fmax(worst_abs, diff);
            worst_ratio = fmax(worst_ratio, diff / bound);
            if (diff > bound)
                bad += 1;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, off);
        nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, off);
        bad += __shfl_xor_sync(0xffffffffu, bad, off);
        nonzero += __shfl_xor_sync(0xffffffffu, nonzero, off);
        worst_abs = fmax(worst_abs, __shfl_xor_sync(0xffffffffu, worst_abs, off));
        worst_ratio = fmax(worst_ratio, __shfl_xor_sync(0xffffffffu, worst_ratio, off));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&stats[0], sq);
        atomicAdd(&stats[3], nonfinite);
        atomicAdd(&stats[4], bad);
        atomicAdd(&stats[5], nonzero);
        atomic_max_pos(&stats[1], worst_abs);
        atomic_max_pos(&stats[2], worst_ratio);
    }
}

// fp32 [batch, seqlen, heads, d] contiguous (the reference forward's O) to 16 bits with the
// strides sb, sr, sh, as a kernel would hand it on: grid (any, batch), any block size.
extern "C" __global__ void ft_ref_to_half(const float *src, unsigned short *dst, int seqlen, int heads, int d,
                                          long long sb, long long sr, long long sh, int bf16)
{
    using namespace ftref;
    const int b = blockIdx.y;
    const long long n = (long long)seqlen * heads * d;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % d), h = (int)(i / d % heads), r = (int)(i / d / heads);
        dst[b * sb + r * sr + h * sh + c] = from_float(src[(long long)b * n + i], bf16);
    }
}
