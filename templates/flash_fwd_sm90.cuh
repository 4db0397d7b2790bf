// flash_fwd_sm90 — warp-specialised FlashAttention forward for compute capability 9.0 (sm_90a).
//
// One CTA computes BM query rows of one (batch, head). Warpgroup 0 is the producer: one of its
// threads loads the Q tile once and then streams K and V tiles through a STAGES-deep ring of
// shared-memory buffers with the tensor-memory accelerator (cp.async.bulk.tensor, tensor maps
// encoded on the host), each load completing on an mbarrier. Warpgroups 1..NWG are consumers;
// each owns 64 query rows and computes S = Q·Kᵀ with wgmma (both operands in shared memory)
// and O += P·V with wgmma (P from registers, V from shared memory), fp32 accumulators, with
// the online softmax of flash_fwd_sm80. A consumer releases a K slot and a V slot of the ring
// on their "empty" mbarriers as soon as its wgmmas have read them, so the producer can refill
// the K slot while P·V still reads the V slot.
//
// Schedule of consumer iteration j (K/V tiles are visited from the last to the first, so the
// tiles that need a mask come first):
//     issue S_j = Q·K_jᵀ, issue O += P_{j-1}·V_{j-1}            (one wgmma group each)
//     OVERLAP: wait for S_j only, softmax statistics of S_j while P·V runs, then wait for P·V
//     else:    wait for both, then the softmax of S_j
//     release slot j-1, rescale O, P_j = exp2(S_j·c − m·c) packed to 16 bits
// PINGPONG (two consumer warpgroups): named barriers make the warpgroups issue their wgmmas
// in turn, so one warpgroup's softmax runs while the other's matrix products use the tensor
// cores.
//
// Conventions are those of flash_fwd_sm80 (the runtime and the reference rely on them):
// Q, O [batch, seqlen_q, heads_q, D], K, V [batch, seqlen_k, heads_kv, D] up to strides (in
// elements, multiples of 8; base pointers 16-byte aligned), grouped-query heads, bottom-right
// causal alignment, O = 0 and LSE = +inf for a row that sees no key, LSE fp32 natural log.
//
// Shared memory: tiles are stored as D/CH column blocks of [rows][CH] elements, rows of
// CH·2 bytes swizzled as TMA's SWIZZLE_128B (CH = 64) or SWIZZLE_64B (CH = 32) writes them,
// which is also wgmma's canonical K-major layout (Q, K) and MN-major layout (V).
//
// Compile-time parameters, defined by the generated prelude:
//   FTP_D        head dimension (64, 96, 128, 192, 256; a multiple of 32)
//   FTP_BM       query rows per CTA: 64 per consumer warpgroup (64, 128, 192)
//   FTP_BN       keys per K/V tile (a multiple of 16, at most 256)
//   FTP_STAGES   depth of the K/V ring (2..4)
//   FTP_CAUSAL   0 or 1                 FTP_PINGPONG  1: consumer warpgroups take turns (BM 128)
//   FTP_OVERLAP  1: softmax of S_j while P_{j-1}·V_{j-1} runs
//   FTP_DTYPE_F16 or FTP_DTYPE_BF16      FT_SMEM_BYTES  dynamic shared memory
// and the generated wgmma wrappers ft_wgmma_s (m64n{BN}k16, both operands from shared memory)
// and ft_wgmma_o (m64n{D}k16, A from registers). No header is included.

#if !defined(FTP_D) || !defined(FTP_BM) || !defined(FTP_BN) || !defined(FTP_STAGES) ||              \
    !defined(FTP_CAUSAL) || !defined(FTP_PINGPONG) || !defined(FTP_OVERLAP) || !defined(FT_SMEM_BYTES)
#error "flash_fwd_sm90 needs FTP_D, FTP_BM, FTP_BN, FTP_STAGES, FTP_CAUSAL, FTP_PINGPONG, FTP_OVERLAP and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_fwd_sm90 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif

namespace ft {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// Kernel arguments; mirrored field for field by runtime/kernel.h (ft_fwd_params).
struct FwdParams {
    const void *q;
    const void *k;
    const void *v;
    void *o;
    float *lse;
    long long q_batch_stride, q_row_stride, q_head_stride;
    long long k_batch_stride, k_row_stride, k_head_stride;
    long long v_batch_stride, v_row_stride, v_head_stride;
    long long o_batch_stride, o_row_stride, o_head_stride;
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k;
    float scale;      // softmax scale applied to q·k
    float scale_log2; // scale · log2(e)
    int reserved;
};

// A CUtensorMap as the kernel sees it: 128 opaque bytes, passed as a __grid_constant__.
struct __align__(128) TensorMap {
    u64 opaque[16];
};

constexpr int D = FTP_D;
constexpr int BM = FTP_BM;
constexpr int BN = FTP_BN;
constexpr int STAGES = FTP_STAGES;
constexpr bool CAUSAL = FTP_CAUSAL != 0;
constexpr bool PINGPONG = FTP_PINGPONG != 0;
constexpr bool OVERLAP = FTP_OVERLAP != 0;

constexpr int NWG = BM / 64;             // consumer warpgroups
constexpr int THREADS = 128 * (NWG + 1); // plus the producer warpgroup
constexpr int CH = D % 64 == 0 ? 64 : 32; // elements per swizzled row of a column block
constexpr int SWB = CH * 2;               // its bytes: the swizzle span (128 or 64)
constexpr int NCB = D / CH;               // column blocks of a tile
constexpr int Q_BYTES = BM * D * 2;
constexpr int KV_BYTES = BN * D * 2; // one K or one V tile
constexpr int BAR_BYTES = 8 * (1 + 4 * STAGES);
constexpr int SMEM_BYTES = 1024 + Q_BYTES + 2 * STAGES * KV_BYTES + BAR_BYTES;
constexpr int SN = BN / 2; // S accumulators per thread
constexpr int ON = D / 2;  // O accumulators per thread

static_assert(D % 32 == 0 && D >= 32 && D <= 256, "head dimension must be a multiple of 32, at most 256");
static_assert(BM % 64 == 0 && NWG >= 1 && NWG <= 3, "64 query rows per consumer warpgroup, 1 to 3 warpgroups");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "key tile must be a multiple of 16, at most 256");
static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 pipeline stages");
static_assert(!PINGPONG || NWG == 2, "ping-pong takes two consumer warpgroups");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");

// Registers per thread after setmaxnreg: the producer gives its registers to the consumers.
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = NWG == 2 ? 240 : 160;

// Named barriers (0 is __syncthreads): ping-pong turns, and one per consumer warpgroup.
constexpr int BAR_TURN = 1;  // BAR_TURN + w: consumer w may issue its wgmmas
constexpr int BAR_WG = 3;    // BAR_WG + w: consumer w's own threads

#define NEG_INF __int_as_float(0xff800000)
#define POS_INF __int_as_float(0x7f800000)

// ---- PTX wrappers ------------------------------------------------------------------------------
__device__ __forceinline__ u32 smem_addr(const void *p)
{
    return (u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(u32 bar, u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity)
{
    u32 done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// One box of a rank-4 tensor map (element, row, head, batch) into shared memory.
__device__ __forceinline__ void tma_load(u32 dst, const TensorMap *map, int c0, int c1, int c2, int c3, u32 bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void named_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across wgmma fences and waits.
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(r[i])::"memory");
}

template <int N> __device__ __forceinline__ void fence_regs(u32 (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+r"(r[i])::"memory");
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Two floats to one 16-bit pair, lo in the low half (the element of the lower column).
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

// ---- shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format") --------------------
// Start address >> 4 in bits 0–13, leading byte offset >> 4 in 16–29, stride byte offset >> 4
// in 32–45, base offset 0 (every swizzle pattern starts on a 1024-byte boundary), swizzle mode
// in 62–63: 1 = 128 B, 2 = 64 B.
constexpr u64 SWIZZLE_MODE = SWB == 128 ? 1ull : 2ull;

__device__ __forceinline__ u64 make_desc(u32 addr, u32 lbo, u32 sbo)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) |
           (SWIZZLE_MODE << 62);
}

// K-major operand (Q or K): 8-row groups SBO = 8 rows apart; a k16 step moves 32 bytes along
// the row inside a column block, the next column block starts rows·SWB bytes further.
__device__ __forceinline__ u64 kmajor_desc(u32 tile, int rows, int kk)
{
    constexpr int KK_PER_BLOCK = CH / 16;
    return make_desc(tile + (kk / KK_PER_BLOCK) * rows * SWB + (kk % KK_PER_BLOCK) * 32, 16, 8 * SWB);
}

// MN-major operand (V as B of P·V, stored [key][d]): CH-wide d chunks are BN·SWB bytes apart
// (LBO), 8-key groups 8·SWB apart (SBO); a k16 step moves 16 keys.
__device__ __forceinline__ u64 v_desc(u32 tile, int kb)
{
    return make_desc(tile + kb * 16 * SWB, BN * SWB, 8 * SWB);
}

// The byte offset of element (row, col) in a column-blocked, swizzled tile of `rows` rows.
__device__ __forceinline__ u32 swizzled_offset(int rows, int row, int col)
{
    const int block = col / CH, chunk = (col % CH) / 8;
    const int swz = SWB == 128 ? (row & 7) : ((row >> 1) & 3);
    return (u32)(block * rows * SWB + row * SWB + ((chunk ^ swz) << 4) + (col % 8) * 2);
}

// ---- the consumer's state and steps ----------------------------------------------------------
struct Consumer {
    u32 sq;        // this warpgroup's 64 rows of the Q tile (column block 0)
    u32 sk, sv;    // K and V rings
    u32 bars;      // q_full, k_full[STAGES], v_full[STAGES], k_empty[STAGES], v_empty[STAGES]
    int w;         // consumer warpgroup 0..NWG-1
    int warp;      // warp inside the warpgroup
    int lane;
    int row0;      // first query row of this thread's rows (row0 and row0 + 8)
    int diag;      // seqlen_k - seqlen_q
    int seqlen_k;
    int n_tiles;
    float scale_log2;
};

__device__ __forceinline__ u32 k_full(const Consumer &c, int s) { return c.bars + 8 + 8 * s; }
__device__ __forceinline__ u32 v_full(const Consumer &c, int s) { return c.bars + 8 + 8 * STAGES + 8 * s; }
__device__ __forceinline__ u32 k_empty(u32 bars, int s) { return bars + 8 + 16 * STAGES + 8 * s; }
__device__ __forceinline__ u32 v_empty(u32 bars, int s) { return bars + 8 + 24 * STAGES + 8 * s; }

// Tile n of the keys (iteration j visits tile n_tiles - 1 - j).
__device__ __forceinline__ int tile_of(const Consumer &c, int j) { return c.n_tiles - 1 - j; }

// Whether some score of this warpgroup's rows in tile n must be masked.
__device__ __forceinline__ bool needs_mask(const Consumer &c, int n)
{
    const int end = (n + 1) * BN;
    if (end > c.seqlen_k)
        return true;
    return CAUSAL && end - 1 > c.row0 - c.warp * 16 - (c.lane >> 2) + c.diag;
}

__device__ __forceinline__ void issue_s(const Consumer &c, int s, float (&acc)[SN])
{
    const u32 k_tile = c.sk + s * KV_BYTES;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
        ft_wgmma_s(acc, kmajor_desc(c.sq, BM, kk), kmajor_desc(k_tile, BN, kk), kk > 0);
}

__device__ __forceinline__ void issue_o(const Consumer &c, int s, float (&o)[ON], const u32 (&p)[BN / 4])
{
    const u32 v_tile = c.sv + s * KV_BYTES;
#pragma unroll
    for (int kb = 0; kb < BN / 16; ++kb)
        ft_wgmma_o(o, p[4 * kb], p[4 * kb + 1], p[4 * kb + 2], p[4 * kb + 3], v_desc(v_tile, kb));
}

// Scores outside the keys or above the causal diagonal become -inf. Accumulator i of the
// thread holds row row0 + 8·((i >> 1) & 1), column 8·(i >> 2) + 2·(lane & 3) + (i & 1).
__device__ __forceinline__ void apply_mask(const Consumer &c, int n, float (&acc)[SN])
{
    const int col0 = n * BN + 2 * (c.lane & 3);
#pragma unroll
    for (int i = 0; i < SN; ++i) {
        const int col = col0 + 8 * (i >> 2) + (i & 1);
        const int row = c.row0 + 8 * ((i >> 1) & 1);
        if (col >= c.seqlen_k || (CAUSAL && col > row + c.diag))
            acc[i] = NEG_INF;
    }
}

// Online softmax of one tile: new row maxima, the factor that rescales the previous state,
// and the exponentials in place of the scores (as fp32).
__device__ __forceinline__ void softmax_step(const Consumer &c, float (&acc)[SN], float (&m)[2], float (&l)[2],
                                             float (&alpha)[2])
{
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int i = 0; i < SN; ++i)
        mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], acc[i]);
    float mc[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = quad_max(mx[h]);
        // A row that has seen no key yet keeps -inf; use 0 so that -inf - -inf never occurs.
        mc[h] = mx[h] == NEG_INF ? 0.f : mx[h] * c.scale_log2;
        alpha[h] = ex2(m[h] * c.scale_log2 - mc[h]);
        m[h] = mx[h];
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < SN; ++i) {
        const int h = (i >> 1) & 1;
        acc[i] = ex2(fmaf(acc[i], c.scale_log2, -mc[h]));
        sum[h] += acc[i];
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
        l[h] = l[h] * alpha[h] + sum[h];
}

__device__ __forceinline__ void rescale_o(float (&o)[ON], const float (&alpha)[2])
{
#pragma unroll
    for (int i = 0; i < ON; ++i)
        o[i] *= alpha[(i >> 1) & 1];
}

// P as the A operand of m64nNk16: accumulators 8kb..8kb+7 packed pairwise are the four A
// registers of k-block kb (the same correspondence as mma.sync's C and A fragments).
__device__ __forceinline__ void pack_p(const float (&acc)[SN], u32 (&p)[BN / 4])
{
#pragma unroll
    for (int i = 0; i < BN / 4; ++i)
        p[i] = pack2(acc[2 * i], acc[2 * i + 1]);
}

__device__ __forceinline__ void turn_begin(const Consumer &c)
{
    if (PINGPONG)
        named_sync(BAR_TURN + c.w, 256);
}

__device__ __forceinline__ void turn_end(const Consumer &c)
{
    if (PINGPONG)
        named_arrive(BAR_TURN + (1 - c.w), 256);
}

// Iteration j >= 1: S_j and O += P_{j-1}·V_{j-1}, the softmax of S_j; K slot j and V slot
// j-1 released as soon as their wgmmas are done.
template <bool MASK>
__device__ __forceinline__ void step(const Consumer &c, int j, float (&o)[ON], u32 (&p)[BN / 4], float (&m)[2],
                                     float (&l)[2])
{
    const int s = j % STAGES, prev = (j - 1) % STAGES;
    float acc[SN];
    float alpha[2];

    mbar_wait(k_full(c, s), (u32)(j / STAGES) & 1);
    mbar_wait(v_full(c, prev), (u32)((j - 1) / STAGES) & 1);
    turn_begin(c);
    wgmma_fence();
    issue_s(c, s, acc);
    wgmma_commit();
    fence_regs(o);
    fence_regs(p);
    issue_o(c, prev, o, p);
    wgmma_commit();
    turn_end(c);
    if (OVERLAP) {
        wgmma_wait<1>();
        fence_regs(acc);
        if (c.lane == 0)
            mbar_arrive(k_empty(c.bars, s));
        if (MASK)
            apply_mask(c, tile_of(c, j), acc);
        softmax_step(c, acc, m, l, alpha);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(p);
    } else {
        wgmma_wait<0>();
        fence_regs(acc);
        fence_regs(o);
        fence_regs(p);
        if (c.lane == 0)
            mbar_arrive(k_empty(c.bars, s));
        if (MASK)
            apply_mask(c, tile_of(c, j), acc);
        softmax_step(c, acc, m, l, alpha);
    }
    if (c.lane == 0)
        mbar_arrive(v_empty(c.bars, prev));
    rescale_o(o, alpha);
    pack_p(acc, p);
}

__device__ __forceinline__ void consume(const Consumer &c, const FwdParams &prm, unsigned char *region,
                                       u32 region_addr, int q_first)
{
    float o[ON];
    u32 p[BN / 4];
    float m[2] = {NEG_INF, NEG_INF};
    float l[2] = {0.f, 0.f};

#pragma unroll
    for (int i = 0; i < ON; ++i)
        o[i] = 0.f;
    if (PINGPONG && c.w == 1)
        named_arrive(BAR_TURN + 0, 256); // consumer 0 takes the first turn

    // Tile 0: S_0 and its softmax (nothing to rescale yet).
    mbar_wait(c.bars, 0);
    mbar_wait(k_full(c, 0), 0);
    {
        float acc[SN];
        float alpha[2];
        turn_begin(c);
        wgmma_fence();
        issue_s(c, 0, acc);
        wgmma_commit();
        turn_end(c);
        wgmma_wait<0>();
        fence_regs(acc);
        if (c.lane == 0)
            mbar_arrive(k_empty(c.bars, 0));
        if (needs_mask(c, tile_of(c, 0)))
            apply_mask(c, tile_of(c, 0), acc);
        softmax_step(c, acc, m, l, alpha);
        pack_p(acc, p);
    }
    int j = 1;
    for (; j < c.n_tiles && needs_mask(c, tile_of(c, j)); ++j)
        step<true>(c, j, o, p, m, l);
    for (; j < c.n_tiles; ++j)
        step<false>(c, j, o, p, m, l);

    // The last P·V.
    const int last = (c.n_tiles - 1) % STAGES;
    mbar_wait(v_full(c, last), (u32)((c.n_tiles - 1) / STAGES) & 1);
    turn_begin(c);
    wgmma_fence();
    fence_regs(o);
    fence_regs(p);
    issue_o(c, last, o, p);
    wgmma_commit();
    turn_end(c);
    wgmma_wait<0>();
    fence_regs(o);
    if (c.lane == 0)
        mbar_arrive(v_empty(c.bars, last));
    if (PINGPONG && c.w == 0)
        named_sync(BAR_TURN + 0, 256); // consumer 1's last hand-over

    // Normalise, write the LSE, stage O over this warpgroup's Q rows for 16-byte stores.
    const int g = c.lane >> 2, t = c.lane & 3;
    const int local0 = c.warp * 16 + g; // rows local0 and local0 + 8 of the warpgroup's 64
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float lsum = quad_sum(l[h]);
        inv[h] = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = c.row0 + 8 * h;
        if (prm.lse != nullptr && t == 0 && row < prm.seqlen_q)
            prm.lse[((long long)blockIdx.z * prm.heads_q + blockIdx.y) * prm.seqlen_q + row] =
                lsum > 0.f ? (m[h] * c.scale_log2 + log2f(lsum)) * 0.69314718055994531f : POS_INF;
    }
#pragma unroll
    for (int i = 0; i < ON; i += 2) {
        const int h = (i >> 1) & 1;
        const int col = 8 * (i >> 2) + 2 * t;
        *(u32 *)(region + swizzled_offset(BM, local0 + 8 * h, col)) = pack2(o[i] * inv[h], o[i + 1] * inv[h]);
    }
    named_sync(BAR_WG + c.w, 128);
    (void)region_addr;
    const int rows = min(64, prm.seqlen_q - (q_first + c.w * 64));
    u16 *out = (u16 *)prm.o + blockIdx.z * prm.o_batch_stride + blockIdx.y * prm.o_head_stride +
               (long long)(q_first + c.w * 64) * prm.o_row_stride;
    const int tid = c.warp * 32 + c.lane;
    for (int idx = tid; idx < rows * (D / 8); idx += 128) {
        const int row = idx / (D / 8), col = (idx % (D / 8)) * 8;
        *(uint4 *)(out + row * prm.o_row_stride + col) = *(const uint4 *)(region + swizzled_offset(BM, row, col));
    }
}

// ---- the producer -------------------------------------------------------------------------------
__device__ __forceinline__ void produce(u32 sq, u32 sk, u32 sv, u32 bars, const TensorMap *tq, const TensorMap *tk,
                                        const TensorMap *tv, int q_first, int head, int kv_head, int batch,
                                        int n_tiles)
{
    mbar_expect_tx(bars, Q_BYTES);
#pragma unroll
    for (int b = 0; b < NCB; ++b)
        tma_load(sq + b * BM * SWB, tq, b * CH, q_first, head, batch, bars);
    for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES, n = n_tiles - 1 - j;
        const u32 kf = bars + 8 + 8 * s, vf = bars + 8 + 8 * STAGES + 8 * s;
        if (j >= STAGES)
            mbar_wait(k_empty(bars, s), (u32)(j / STAGES - 1) & 1);
        mbar_expect_tx(kf, KV_BYTES);
#pragma unroll
        for (int b = 0; b < NCB; ++b)
            tma_load(sk + s * KV_BYTES + b * BN * SWB, tk, b * CH, n * BN, kv_head, batch, kf);
        if (j >= STAGES)
            mbar_wait(v_empty(bars, s), (u32)(j / STAGES - 1) & 1);
        mbar_expect_tx(vf, KV_BYTES);
#pragma unroll
        for (int b = 0; b < NCB; ++b)
            tma_load(sv + s * KV_BYTES + b * BN * SWB, tv, b * CH, n * BN, kv_head, batch, vf);
    }
}

__device__ __forceinline__ void flash_fwd(const FwdParams &p, const TensorMap *tq, const TensorMap *tk,
                                          const TensorMap *tv)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    const int m_block = (int)(gridDim.x - 1 - blockIdx.x); // the longest causal rows start first
    const int head = (int)blockIdx.y;
    const int batch = (int)blockIdx.z;
    const int kv_head = head / (p.heads_q / p.heads_kv);
    const int tid = (int)threadIdx.x;
    const int diag = p.seqlen_k - p.seqlen_q;
    const int q_first = m_block * BM;
    const int q_valid = min(BM, p.seqlen_q - q_first);

    // Keys this block needs: all of them, or (causal) up to the diagonal of its last row.
    int key_end = p.seqlen_k;
    if (CAUSAL)
        key_end = min(key_end, q_first + q_valid + diag);
    const int n_tiles = key_end > 0 ? (key_end + BN - 1) / BN : 0;

    if (n_tiles == 0) { // every row of the block sees no key
        u16 *o = (u16 *)p.o + batch * p.o_batch_stride + head * p.o_head_stride + q_first * p.o_row_stride;
        for (int idx = tid; idx < q_valid * (D / 8); idx += THREADS) {
            const int row = idx / (D / 8), col = (idx % (D / 8)) * 8;
            *(uint4 *)(o + row * p.o_row_stride + col) = make_uint4(0, 0, 0, 0);
        }
        if (p.lse != nullptr)
            for (int row = tid; row < q_valid; row += THREADS)
                p.lse[((long long)batch * p.heads_q + head) * p.seqlen_q + q_first + row] = POS_INF;
        return;
    }

    const u32 raw = smem_addr(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u; // swizzle patterns start on 1024-byte boundaries
    unsigned char *smem = smem_raw + (base - raw);
    const u32 sq = base, sk = sq + Q_BYTES, sv = sk + STAGES * KV_BYTES, bars = sv + STAGES * KV_BYTES;

    if (tid == 0) {
        mbar_init(bars, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 + 8 * s, 1);
            mbar_init(bars + 8 + 8 * STAGES + 8 * s, 1);
            mbar_init(k_empty(bars, s), NWG * 4); // one arrival per consumer warp
            mbar_init(v_empty(bars, s), NWG * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    const int wg = tid / 128;
    if (wg == 0) {
        if (NWG > 1)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (tid == 0)
            produce(sq, sk, sv, bars, tq, tk, tv, q_first, head, kv_head, batch, n_tiles);
        return;
    }
    if (NWG > 1)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));

    Consumer c;
    c.w = wg - 1;
    c.warp = (tid / 32) % 4;
    c.lane = tid % 32;
    c.sq = sq + c.w * 64 * SWB;
    c.sk = sk;
    c.sv = sv;
    c.bars = bars;
    c.row0 = q_first + c.w * 64 + c.warp * 16 + (c.lane >> 2);
    c.diag = diag;
    c.seqlen_k = p.seqlen_k;
    c.n_tiles = n_tiles;
    c.scale_log2 = p.scale_log2;
    consume(c, p, smem + c.w * 64 * SWB, c.sq, q_first);
}

} // namespace ft

// The generated entry point: FT_DEFINE_KERNEL(name) at the end of each generated source.
#define FT_DEFINE_KERNEL(name)                                                                           \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, 1)                                         \
        name(const ft::FwdParams p, const __grid_constant__ ft::TensorMap tq,                            \
             const __grid_constant__ ft::TensorMap tk, const __grid_constant__ ft::TensorMap tv)         \
    {                                                                                                    \
        ft::flash_fwd(p, &tq, &tk, &tv);                                                                 \
    }
