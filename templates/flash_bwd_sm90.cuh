// flash_bwd_sm90 — FlashAttention backward kernels on wgmma for compute capability 9.0 (sm_90a).
//
// The same operation and conventions as flash_bwd_sm80 (dQ, dK, dV by recomputing P from Q, K
// and the forward's LSE; bottom-right causal alignment; grouped-query heads; a row that sees no
// key contributes nothing), with the five matrix products on warpgroup MMAs:
//   Sᵀ  = K·Qᵀ    dPᵀ = V·dOᵀ      m64 (keys) × BM (queries) × D, both operands in shared memory
//   dV += Pᵀ·dO   dK += dSᵀ·Q      m64 (keys) × D × BM, Pᵀ and dSᵀ from registers (the
//                                  accumulators of Sᵀ and dPᵀ are already the A operands)
//   dQ  = dS·K                     m64 (queries) × 64 × BN per pass, dSᵀ through shared memory
//                                  (read transposed: MN-major A), K read MN-major
// P and dS are rounded to the element type before the products that take them; accumulation is
// fp32 throughout.
//
// ---- the three kernels, in stream order: pre → main → post ----------------------------------
// FT_DEFINE_KERNEL(name) defines name##_pre, name and name##_post, extern "C", each taking one
// BwdParams by value, all with THREADS = 128·NWG threads (NWG = BN/64 warpgroups). With
// MBQ = ceil(seqlen_q / BM) and NBK = ceil(seqlen_k / BN):
//   name##_pre   grid (MBQ, heads_q, batch): D = rowsum(dO ∘ O) and LSE·log2(e) of the query
//                block into the workspace (padding rows: 0 and +inf, so that their P is 0),
//                and its dQ accumulator tile zeroed. The host zeroes nothing.
//   name         grid (NBK, heads_kv, batch), FT_SMEM_BYTES of dynamic shared memory. One CTA
//                per key block of one K/V head: loads the block's K and V once, then walks every
//                query head of the K/V group and, in each, the query blocks that see the block
//                (causal: from the first row that sees its first key), two Q/dO/LSE/D buffers
//                deep (cp.async: the next block loads while this one computes); dK and dV stay
//                in registers and are written (dK scaled) at the end; each warpgroup adds its
//                columns of the block's dQ partial into the workspace with red.global.add.v4.
//   name##_post  grid (MBQ, heads_q, batch): dQ accumulator tile → dQ · scale, element type.
//
// ---- the workspace (BwdParams::ws, 16-byte aligned; 256 recommended) --------------------------
// With SQP = MBQ·BM, in this order (the sizes of flash_bwd_sm80's without its optional regions):
//   dq_acc  float [batch][heads_q][MBQ][BM·D]   one tile per query block, in the order the main
//                                               kernel's threads hold their dQ accumulators
//                                               (dq_index)
//   lse2    float [batch][heads_q][SQP]         LSE·log2(e); +inf on padding rows
//   dsum    float [batch][heads_q][SQP]         D; 0 on padding rows
//
// ---- shared memory ------------------------------------------------------------------------------
// From a 1024-aligned base: K and V [BN][D], two stages of Q and dO [BM][D], dSᵀ [BN][BM], two
// stages of LSE·log2(e) and D [BM]. Tiles are column blocks of 64 elements, rows of 128 bytes
// whose 16-byte chunks are XOR-swizzled by the row (chunk c of row r at c ^ (r & 7)), written so
// by the cp.async loads: wgmma's 128-byte-swizzle canonical layout, read K-major (along D) and
// MN-major (along the rows) alike.
//
// Per query block: wait for its loads, start the next block's; Sᵀ and dPᵀ (one wgmma group),
// wait; Pᵀ and dSᵀ in registers; dSᵀ to shared memory; dV and dK issued (not waited for);
// barrier; dQ by passes of 64 columns, each waited for and added to the workspace; barrier.
//
// Compile-time parameters, defined by the generated prelude:
//   FTP_D       head dimension (64 or 128)     FTP_BM  query rows per block of the loop (64)
//   FTP_BN      keys per CTA: 64 per warpgroup (64, 128); D/NWG a multiple of 64
//   FTP_CAUSAL  0 or 1      FTP_DTYPE_F16 or FTP_DTYPE_BF16      FT_SMEM_BYTES
// and the generated wgmma wrappers ft_wgmma_st (m64n{BM}k16, both operands K-major in shared
// memory), ft_wgmma_kv (m64n{D}k16, A from registers, B MN-major) and ft_wgmma_dq (m64n64k16,
// A and B MN-major in shared memory).

#if !defined(FTP_D) || !defined(FTP_BM) || !defined(FTP_BN) || !defined(FTP_CAUSAL) || !defined(FT_SMEM_BYTES)
#error "flash_bwd_sm90 needs FTP_D, FTP_BM, FTP_BN, FTP_CAUSAL and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_bwd_sm90 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif

#include "ft_device.cuh"
#include "ft_params_bwd.cuh"
#include "ft_sm80.cuh"
#include "ft_sm90.cuh"
#include "ft_atomic.cuh"

namespace ft {

constexpr int D = FTP_D;
constexpr int BM = FTP_BM;
constexpr int BN = FTP_BN;
constexpr bool CAUSAL = FTP_CAUSAL != 0;

constexpr int NWG = BN / 64;       // warpgroups: 64 keys each
constexpr int THREADS = 128 * NWG;
constexpr int DC = D / NWG;        // dQ columns per warpgroup
constexpr int DQ_PASSES = DC / 64; // of 64 columns each
constexpr int ROW = 128;           // bytes per row of a 64-column block
constexpr int CPR = D / 8;         // 16-byte chunks per row of a tile
constexpr int SN = BM / 2;         // Sᵀ (and dPᵀ) accumulators per thread
constexpr int KN = D / 2;          // dK (and dV) accumulators per thread

constexpr u32 KV_BYTES = BN * D * 2;
constexpr u32 QT_BYTES = BM * D * 2;
constexpr u32 OFF_K = 0;
constexpr u32 OFF_V = OFF_K + KV_BYTES;
constexpr u32 OFF_Q = OFF_V + KV_BYTES;      // stage s at OFF_Q + s·QT_BYTES
constexpr u32 OFF_DO = OFF_Q + 2 * QT_BYTES;
constexpr u32 OFF_DS = OFF_DO + 2 * QT_BYTES;
constexpr u32 OFF_STAT = OFF_DS + BN * BM * 2; // stage s: BM floats of LSE·log2(e), then BM of D
constexpr int SMEM_BYTES = 1024 + OFF_STAT + 2 * 2 * BM * 4;

static_assert(D == 64 || D == 128, "head dimension 64 or 128");
static_assert(BM == 64, "64 query rows per block of the loop");
static_assert(BN == 64 || BN == 128, "64 keys per warpgroup, one or two warpgroups");
static_assert(DC % 64 == 0, "each warpgroup's dQ columns are whole 64-column blocks");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");

__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void st_shared(u32 addr, u32 v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ float ld_shared_f(u32 addr)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
    return v;
}

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

// ---- shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format"): start >> 4 in bits
// 0–13, leading byte offset >> 4 in 16–29, stride byte offset >> 4 in 32–45, base offset 0
// (every tile starts on a 1024-byte boundary), 128-byte swizzle (1) in 62–63.
__device__ __forceinline__ u64 make_desc(u32 addr, u32 lbo, u32 sbo)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}

// K-major operand: a tile of `rows` rows from row r0 (a multiple of 8), k16 step kk along D (32
// bytes inside a column block; the next block starts rows·128 bytes further); 8-row groups 1024
// bytes apart.
__device__ __forceinline__ u64 kmajor(u32 tile, int rows, int r0, int kk)
{
    return make_desc(tile + (kk / 4) * rows * ROW + r0 * ROW + (kk % 4) * 32, 16, 8 * ROW);
}

// MN-major operand: the tile's rows are the k dimension (16 rows per step kb), its 64-column
// blocks the m or n dimension from block cb0 on (rows·128 bytes apart: LBO); 8-row groups 1024
// bytes apart (SBO).
__device__ __forceinline__ u64 mnmajor(u32 tile, int rows, int cb0, int kb)
{
    return make_desc(tile + cb0 * rows * ROW + kb * 16 * ROW, rows * ROW, 8 * ROW);
}

// ---- the workspace -----------------------------------------------------------------------------
struct Workspace {
    float *dq;   // [b][hq][mbq] tiles of BM·D floats, in dq_index order
    float *lse2; // [b][hq][mbq·BM]
    float *dsum; // [b][hq][mbq·BM]
    int mbq;
};

__device__ __forceinline__ Workspace workspace(const BwdParams &p)
{
    Workspace w;
    w.mbq = (p.seqlen_q + BM - 1) / BM;
    const long long rows = (long long)p.batch * p.heads_q * w.mbq * BM;
    w.dq = p.ws;
    w.lse2 = p.ws + rows * D;
    w.dsum = w.lse2 + rows;
    return w;
}

// Where thread `t` of the CTA (warpgroup t / 128) keeps dQ accumulator i of a tile: each
// thread's DC/2 values are adjacent, so that four of them go in one red.global.add.v4. The
// element is row 16·warp + g + 8·((i >> 1) & 1), column wg·DC + 8·(i >> 2) + 2·(lane & 3) + (i & 1)
// (warp and lane within the warpgroup, g = lane >> 2): the wgmma accumulator layout.
__device__ __forceinline__ int dq_index(int t, int i)
{
    return t * (DC / 2) + i;
}

// Loads `rows` rows of a [rows][D] tile (row stride in elements) into its swizzled column blocks
// at dst; rows from `valid` on are zero-filled.
__device__ __forceinline__ void load_tile(u32 dst, const u16 *src, long long row_stride, int rows, int valid, int tid)
{
    for (int i = tid; i < rows * CPR; i += THREADS) {
        const int r = i / CPR, c = i % CPR;
        const u32 off = (u32)((c / 8) * rows * ROW + r * ROW + (((c % 8) ^ (r & 7)) * 16));
        const bool ok = r < valid;
        cp_async16(dst + off, ok ? (const void *)(src + r * row_stride + c * 8) : (const void *)src, ok ? 16 : 0);
    }
}

// The loads of one query block: Q and dO rows, and its LSE·log2(e) and D from the workspace.
__device__ __forceinline__ void load_block(const BwdParams &p, const Workspace &ws, u32 base, int stage, int batch,
                                           int head, int m, int tid)
{
    const int q0 = m * BM, valid = min(BM, p.seqlen_q - q0);
    const u16 *q = (const u16 *)p.q + batch * p.q_batch_stride + head * p.q_head_stride + q0 * p.q_row_stride;
    const u16 *dout =
        (const u16 *)p.dout + batch * p.dout_batch_stride + head * p.dout_head_stride + q0 * p.dout_row_stride;
    load_tile(base + OFF_Q + stage * QT_BYTES, q, p.q_row_stride, BM, valid, tid);
    load_tile(base + OFF_DO + stage * QT_BYTES, dout, p.dout_row_stride, BM, valid, tid);
    const long long row0 = ((long long)batch * p.heads_q + head) * (ws.mbq * BM) + q0;
    const u32 stat = base + OFF_STAT + stage * 2 * BM * 4;
    for (int i = tid; i < 2 * BM / 4; i += THREADS) {
        const float *src = i < BM / 4 ? ws.lse2 + row0 + 4 * i : ws.dsum + row0 + 4 * (i - BM / 4);
        cp_async16(stat + 16 * i, src, 16);
    }
}

// ---- the main kernel -----------------------------------------------------------------------------
__device__ __forceinline__ void bwd_main(const BwdParams &p)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const int n_blk = (int)blockIdx.x, kv_head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const int tid = (int)threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int g = lane >> 2, t4 = lane & 3;
    const Workspace ws = workspace(p);
    const int n0 = n_blk * BN;
    const int group = p.heads_q / p.heads_kv;
    const int delta = p.seqlen_k - p.seqlen_q;

    // The query blocks that see this key block: causal, from the block of the first row that
    // sees key n0 (row n0 - delta); none when that row is past the last.
    int m_begin = 0;
    if (CAUSAL) {
        const int first = n0 - delta;
        m_begin = first <= 0 ? 0 : first / BM;
    }
    const int per_head = ws.mbq > m_begin ? ws.mbq - m_begin : 0;
    const int total = per_head * group;

    const u16 *k = (const u16 *)p.k + batch * p.k_batch_stride + kv_head * p.k_head_stride + n0 * p.k_row_stride;
    const u16 *v = (const u16 *)p.v + batch * p.v_batch_stride + kv_head * p.v_head_stride + n0 * p.v_row_stride;
    const int valid_k = min(BN, p.seqlen_k - n0);
    load_tile(base + OFF_K, k, p.k_row_stride, BN, valid_k, tid);
    load_tile(base + OFF_V, v, p.v_row_stride, BN, valid_k, tid);
    if (total > 0)
        load_block(p, ws, base, 0, batch, kv_head * group, m_begin, tid);
    cp_async_commit();

    float dk[KN], dv[KN];
#pragma unroll
    for (int i = 0; i < KN; ++i)
        dk[i] = dv[i] = 0.f;

    // This thread's keys: rows key0 and key0 + 8 of the Sᵀ accumulators.
    const int key0 = n0 + wg * 64 + warp * 16 + g;
    for (int it = 0; it < total; ++it) {
        const int stage = it & 1;
        const int head = kv_head * group + it / per_head, m = m_begin + it % per_head;
        if (it + 1 < total) {
            load_block(p, ws, base, stage ^ 1, batch, kv_head * group + (it + 1) / per_head,
                       m_begin + (it + 1) % per_head, tid);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        fence_proxy_async();
        __syncthreads();

        const u32 qt = base + OFF_Q + stage * QT_BYTES, dot = base + OFF_DO + stage * QT_BYTES;
        const u32 stat = base + OFF_STAT + stage * 2 * BM * 4;
        float s[SN], dp[SN];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            ft_wgmma_st(s, kmajor(base + OFF_K, BN, wg * 64, kk), kmajor(qt, BM, 0, kk), kk > 0);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            ft_wgmma_st(dp, kmajor(base + OFF_V, BN, wg * 64, kk), kmajor(dot, BM, 0, kk), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(s);
        fence_regs(dp);

        // Pᵀ = exp2(Sᵀ·scale·log2(e) − LSE·log2(e)) and dSᵀ = Pᵀ ∘ (dPᵀ − D), packed in pairs of
        // adjacent query columns: pf[i/2] holds elements i and i + 1 (the A operand's order).
        u32 pf[SN / 2], dsf[SN / 2];
        const int q_base = m * BM;
#pragma unroll
        for (int i = 0; i < SN; i += 2) {
            const int key = key0 + 8 * ((i >> 1) & 1);
            const int col = 8 * (i >> 2) + 2 * t4;
            float pv[2], dsv[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float l2 = ld_shared_f(stat + 4 * (col + e));
                const float dd = ld_shared_f(stat + 4 * (BM + col + e));
                const float x = ex2(fmaf(s[i + e], p.scale_log2, -l2));
                const bool masked = key >= p.seqlen_k || (CAUSAL && key > q_base + col + e + delta);
                pv[e] = masked ? 0.f : x;
                dsv[e] = pv[e] * (dp[i + e] - dd);
            }
            pf[i / 2] = pack2(pv[0], pv[1]);
            dsf[i / 2] = pack2(dsv[0], dsv[1]);
        }

        // dSᵀ to shared memory for dQ: row = the key in the CTA's block, 128-byte rows of 64
        // queries, chunk j of row r at j ^ (r & 7).
        const u32 ds = base + OFF_DS;
#pragma unroll
        for (int i = 0; i < SN; i += 2) {
            const int r = wg * 64 + warp * 16 + g + 8 * ((i >> 1) & 1);
            const int j = i >> 2;
            st_shared(ds + (u32)(r * ROW + ((j ^ (r & 7)) * 16) + 4 * t4), dsf[i / 2]);
        }

        // dV += Pᵀ·dO and dK += dSᵀ·Q: k = the BM queries, 16 per step.
        wgmma_fence();
#pragma unroll
        for (int kb = 0; kb < BM / 16; ++kb)
            ft_wgmma_kv(dv, pf[4 * kb], pf[4 * kb + 1], pf[4 * kb + 2], pf[4 * kb + 3], mnmajor(dot, BM, 0, kb));
#pragma unroll
        for (int kb = 0; kb < BM / 16; ++kb)
            ft_wgmma_kv(dk, dsf[4 * kb], dsf[4 * kb + 1], dsf[4 * kb + 2], dsf[4 * kb + 3], mnmajor(qt, BM, 0, kb));
        wgmma_commit();

        fence_proxy_async();
        __syncthreads(); // every warpgroup's dSᵀ is in shared memory

        // dQ (this warpgroup's DC columns, 64 per pass) = dS·K over all BN keys.
        float *dqw = ws.dq + (((long long)batch * p.heads_q + head) * ws.mbq + m) * (BM * D);
#pragma unroll
        for (int pass = 0; pass < DQ_PASSES; ++pass) {
            float dq[32];
            wgmma_fence();
#pragma unroll
            for (int kb = 0; kb < BN / 16; ++kb)
                ft_wgmma_dq(dq, mnmajor(ds, BN, 0, kb), mnmajor(base + OFF_K, BN, wg * DQ_PASSES + pass, kb), kb > 0);
            wgmma_commit();
            wgmma_wait<0>();
            fence_regs(dq);
#pragma unroll
            for (int i = 0; i < 32; i += 4)
                red_add4(dqw + dq_index(tid, pass * 32 + i), dq[i], dq[i + 1], dq[i + 2], dq[i + 3]);
        }
        fence_regs(dk);
        fence_regs(dv);
        fence_regs(pf);
        fence_regs(dsf);
        __syncthreads(); // this block's stage and dSᵀ are free for the next loads
    }
    cp_async_wait<0>(); // a block no query sees has its K/V loads still in flight

    // dK (scaled) and dV of this thread's keys: columns 8·(i >> 2) + 2·t4, two at a time.
    u16 *dkp = (u16 *)p.dk + batch * p.dk_batch_stride + kv_head * p.dk_head_stride;
    u16 *dvp = (u16 *)p.dv + batch * p.dv_batch_stride + kv_head * p.dv_head_stride;
#pragma unroll
    for (int i = 0; i < KN; i += 2) {
        const int key = key0 + 8 * ((i >> 1) & 1);
        const int col = 8 * (i >> 2) + 2 * t4;
        if (key < p.seqlen_k) {
            *(u32 *)(dkp + key * p.dk_row_stride + col) = pack2(dk[i] * p.scale, dk[i + 1] * p.scale);
            *(u32 *)(dvp + key * p.dv_row_stride + col) = pack2(dv[i], dv[i + 1]);
        }
    }
}

// ---- the preprocessing kernel ---------------------------------------------------------------------
// D and LSE·log2(e) of query block blockIdx.x: CPR lanes per row, one 16-byte chunk of dO and O
// each, reduced with xor shuffles; then the block's dQ accumulator tile zeroed.
__device__ __forceinline__ void bwd_pre(const BwdParams &p)
{
    const int m = (int)blockIdx.x, head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const Workspace ws = workspace(p);
    constexpr int RPW = 32 / CPR; // rows per warp and pass
    const int sub = lane / CPR, c = lane % CPR;
    const long long bh = (long long)batch * p.heads_q + head;
    const long long row0 = bh * (ws.mbq * BM) + m * BM;
    const u16 *dout = (const u16 *)p.dout + batch * p.dout_batch_stride + head * p.dout_head_stride;
    const u16 *o = (const u16 *)p.o + batch * p.o_batch_stride + head * p.o_head_stride;

    for (int r = warp * RPW; r < BM; r += (THREADS / 32) * RPW) {
        const int row = r + sub;
        const int q_row = m * BM + row;
        float acc = 0.f;
        if (q_row < p.seqlen_q) {
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
        for (int off = CPR / 2; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (c == 0) {
            const bool real = q_row < p.seqlen_q;
            ws.dsum[row0 + row] = real ? acc : 0.f;
            ws.lse2[row0 + row] = real ? p.lse[bh * p.seqlen_q + q_row] * 1.4426950408889634f : POS_INF;
        }
    }
    float4 *dq = (float4 *)(ws.dq + (bh * ws.mbq + m) * (BM * D));
    for (int i = tid; i < BM * D / 4; i += THREADS)
        dq[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// ---- the postprocessing kernel --------------------------------------------------------------------
// dQ accumulator tile blockIdx.x → dQ · scale: four accumulators (two rows, two columns) a step.
__device__ __forceinline__ void bwd_post(const BwdParams &p)
{
    const int x = (int)blockIdx.x, head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const Workspace ws = workspace(p);
    const float *src = ws.dq + (((long long)batch * p.heads_q + head) * ws.mbq + x) * (BM * D);
    u16 *dq = (u16 *)p.dq + batch * p.dq_batch_stride + head * p.dq_head_stride;

    constexpr int GROUPS = DC / 8; // of four accumulators per thread
    for (int k = (int)threadIdx.x; k < THREADS * GROUPS; k += THREADS) {
        const int t = k / GROUPS, i = 4 * (k % GROUPS);
        const int wgt = t / 128, lane = t % 32;
        const int row = x * BM + 16 * ((t % 128) / 32) + (lane >> 2);
        const int col = wgt * DC + 8 * (i >> 2) + 2 * (lane & 3);
        const float4 a = *(const float4 *)(src + dq_index(t, i));
        if (row < p.seqlen_q)
            *(u32 *)(dq + row * p.dq_row_stride + col) = pack2(a.x * p.scale, a.y * p.scale);
        if (row + 8 < p.seqlen_q)
            *(u32 *)(dq + (row + 8) * p.dq_row_stride + col) = pack2(a.z * p.scale, a.w * p.scale);
    }
}

} // namespace ft

// The generated entry points: FT_DEFINE_KERNEL(name) at the end of each generated source.
#define FT_DEFINE_KERNEL(name)                                                                         \
    extern "C" __global__ void __launch_bounds__(ft::THREADS) name##_pre(const ft::BwdParams p)         \
    {                                                                                                  \
        ft::bwd_pre(p);                                                                                \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, 1) name(const ft::BwdParams p)            \
    {                                                                                                  \
        ft::bwd_main(p);                                                                               \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ft::THREADS) name##_post(const ft::BwdParams p)        \
    {                                                                                                  \
        ft::bwd_post(p);                                                                               \
    }
