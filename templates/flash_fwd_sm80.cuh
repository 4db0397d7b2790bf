// flash_fwd_sm80 — FlashAttention-2-style forward kernel for compute capability 8.0 and newer.
//
// One CTA computes BM query rows of one (batch, head). Its warps split the rows (each warp
// owns BM/WARPS rows, a multiple of 16) and share the K/V tiles, which stream through a
// STAGES-deep ring of shared-memory buffers filled by cp.async. Scores S = Q·Kᵀ and the
// output O += P·V are computed with mma.sync.m16n8k16 (fp16 or bf16 operands, fp32
// accumulation); the online softmax keeps a running row maximum m and sum l in registers
// and rescales O only by multiplication; O is normalised once at the end and the
// log-sum-exp of each row is written alongside.
//
// Conventions (the contract the runtime and the reference rely on):
//   * Q, O: [batch, seqlen_q, heads_q, D]; K, V: [batch, seqlen_k, heads_kv, D]; the batch,
//     row and head strides are free (in elements), the last dimension is contiguous. Base
//     pointers are 16-byte aligned and every stride is a multiple of 8 elements.
//   * Grouped-query attention: Q head h reads K/V head h / (heads_q / heads_kv).
//   * Causal masking is aligned to the bottom-right corner: row i sees key j iff
//     j <= i + seqlen_k - seqlen_q (as in FlashAttention 2.1 and later).
//   * A row that sees no key gets O = 0 and LSE = +inf, so that exp(s - lse) is 0 for it.
//   * LSE (optional, may be null) is fp32 [batch, heads_q, seqlen_q], natural logarithm,
//     in the units of scale·s.
//   * Variable-length batches (cu_seqlens_q, cu_seqlens_k): each block finds its sequence's
//     rows and lengths (Seq, ft_params.cuh); the grid is sized by the longest sequence, and a
//     block past a shorter one's rows returns at once. Keys past a sequence's last are never
//     read (the loads stop at its length).
//
// Compile-time parameters, defined by the generated prelude:
//   FTP_D        head dimension (a multiple of 8 from 32 to 256)
//   FTP_BM       query rows per CTA            FTP_BN      keys per K/V tile
//   FTP_WARPS    warps per CTA                 FTP_STAGES  depth of the K/V ring (1..4)
//   FTP_CAUSAL   0 or 1                        FTP_QREG    1: keep Q fragments in registers
//   FTP_OVERLAP  1: issue P·V of one tile with Q·Kᵀ of the next (needs STAGES >= 2)
//   FTP_DTYPE_F16 or FTP_DTYPE_BF16            FT_SMEM_BYTES  dynamic shared memory
// The shared device headers below are written into the generated source in place of their
// #include lines, so a generated kernel compiles on its own with NVRTC and with nvcc.

#if !defined(FTP_D) || !defined(FTP_BM) || !defined(FTP_BN) || !defined(FTP_WARPS) || \
    !defined(FTP_STAGES) || !defined(FTP_CAUSAL) || !defined(FTP_QREG) || !defined(FTP_OVERLAP) ||  \
    !defined(FT_SMEM_BYTES)
#error "flash_fwd_sm80 needs FTP_D, FTP_BM, FTP_BN, FTP_WARPS, FTP_STAGES, FTP_CAUSAL, FTP_QREG, FTP_OVERLAP and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_fwd_sm80 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif

#include "ft_device.cuh"
#include "ft_params.cuh"
#include "ft_sm80.cuh"
#include "ft_softmax.cuh"

namespace ft {

constexpr int D = FTP_D;
constexpr int BM = FTP_BM;
constexpr int BN = FTP_BN;
constexpr int WARPS = FTP_WARPS;
constexpr int STAGES = FTP_STAGES;
constexpr bool CAUSAL = FTP_CAUSAL != 0;
constexpr bool QREG = FTP_QREG != 0;
constexpr bool OVERLAP = FTP_OVERLAP != 0;
#if defined(FTP_DTYPE_BF16)
constexpr bool BF16 = true;
#else
constexpr bool BF16 = false;
#endif

constexpr int THREADS = WARPS * 32;
constexpr int WARP_ROWS = BM / WARPS; // query rows per warp
constexpr int MT = WARP_ROWS / 16;    // m16 tiles per warp
constexpr int NC = D / 8;             // 16-byte chunks per row
constexpr int KSTEPS = (D + 15) / 16; // k16 steps of Q·Kᵀ
// An odd multiple of 8 (72, 88, ...): the last k16 step of Q·Kᵀ has real columns in its first
// half only, which it loads alone (ldmatrix_x2) and pairs with zeros in registers for the second
// half; P·V's last n8 tile of O is loaded alone too. Nothing reads past column D of a tile.
constexpr bool HALF_K = D % 16 != 0;
constexpr int NT = BN / 8;            // n8 tiles of S
constexpr int DT = D / 8;             // n8 tiles of O
constexpr int PITCH = (16 * KSTEPS + 8) * 2; // bytes per tile row (see the layout below)
constexpr int Q_BYTES = BM * PITCH;
constexpr int KV_BYTES = BN * PITCH; // one K or one V tile
constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGES * KV_BYTES;

static_assert(D % 8 == 0 && D >= 32 && D <= 256, "head dimension must be a multiple of 8 from 32 to 256");
static_assert(BM % (16 * WARPS) == 0, "each warp owns a multiple of 16 query rows");
static_assert(BN % 16 == 0 && BN >= 16, "key tile must be a multiple of 16");
static_assert(STAGES >= 1 && STAGES <= 4, "1 to 4 pipeline stages");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");

// ---- shared-memory layout ------------------------------------------------------------------
// Tiles are stored row-major with a pitch of D + 8 elements (one spare 16-byte chunk per
// row; D + 16 at an odd multiple of 8, two spare chunks). Eight consecutive rows read at the
// same column, as one ldmatrix phase does, then start 2·KSTEPS + 1 chunks apart, an odd
// number, so they fall in 8 different 16-byte bank groups: no bank conflicts, and every
// address is a per-lane base plus a compile-time offset (a swizzle would cost a register per
// k-step for its XOR terms). The spare chunks are never written nor read.

__device__ __forceinline__ int tile_offset(int row, int chunk)
{
    return row * PITCH + chunk * 16;
}

// ---- global → shared tile copies ---------------------------------------------------------------
// Copies ROWS rows of D elements starting at src (row stride in elements) into a tile;
// rows at or beyond `valid` are zero-filled (cp.async with a source size of 0). Each
// thread walks its chunks with one pointer so that no per-chunk 64-bit offset stays live.
template <int ROWS>
__device__ __forceinline__ void load_tile(u32 dst, const u16 *src, long long row_stride, int valid)
{
    constexpr int CHUNKS = ROWS * NC;
    constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
    if (THREADS % NC == 0) {
        // Each thread keeps one column chunk and steps down the rows.
        constexpr int ROW_STEP = THREADS % NC == 0 ? THREADS / NC : 1;
        int row = (int)threadIdx.x / NC;
        const int chunk = (int)threadIdx.x % NC;
        const u16 *g = src + row * row_stride + chunk * 8;
        u32 s = dst + tile_offset(row, chunk);
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            if (CHUNKS % THREADS == 0 || it * THREADS + (int)threadIdx.x < CHUNKS) {
                bool ok = row < valid;
                cp_async16(s, ok ? g : src, ok ? 16 : 0);
            }
            row += ROW_STEP;
            g += ROW_STEP * row_stride;
            s += ROW_STEP * PITCH;
        }
    } else {
        // Head dims whose chunk count does not divide the thread count (96, 192, and the odd
        // multiples of 8).
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            int idx = it * THREADS + (int)threadIdx.x;
            if (CHUNKS % THREADS == 0 || idx < CHUNKS) {
                int row = idx / NC;
                int chunk = idx % NC;
                bool ok = row < valid;
                cp_async16(dst + tile_offset(row, chunk), ok ? src + row * row_stride + chunk * 8 : src,
                           ok ? 16 : 0);
            }
        }
    }
}

// Per-thread state of one CTA's run over the K/V tiles.
struct State {
    float o[MT][DT][4]; // unnormalised output, mma C layout
    float m[MT][2];     // running row maximum of the raw scores (rows g and g+8)
    float l[MT][2];     // this thread's part of the running row sum
    u32 qf[QREG ? MT : 1][QREG ? KSTEPS : 1][4];
};

struct Ctx {
    u32 sq_base, sk_base, sv_base; // shared addresses of Q, the K ring, the V ring
    const u16 *k_base, *v_base;    // this (batch, kv head) at key 0
    long long k_row_stride, v_row_stride;
    int seqlen_k;
    int n_tiles;
    int row0;     // first query row of this warp
    int diag;     // seqlen_k - seqlen_q
    int q_first;  // first query row of this block
    int lane, warp;
    float scale_log2;
};

// Loads Q fragments (m-tile mt, k-step kk) from the shared Q tile; with HALF_K the last
// step's columns 8–15 (past D) are zeros.
__device__ __forceinline__ void load_q_frag(const Ctx &c, int mt, int kk, u32 (&a)[4])
{
    int row = c.warp * WARP_ROWS + mt * 16 + (c.lane & 15);
    if (HALF_K && kk == KSTEPS - 1) {
        ldmatrix_x2<false>(c.sq_base + tile_offset(row, 2 * kk), a[0], a[1]);
        a[2] = a[3] = 0u;
        return;
    }
    int chunk = 2 * kk + (c.lane >> 4);
    ldmatrix_x4(c.sq_base + tile_offset(row, chunk), a[0], a[1], a[2], a[3]);
}

// Loads for pipeline iteration j: tile n_tiles-1-j (tiles run backwards, so that the ones
// needing a mask come first) into ring slot j % STAGES. Nothing past the last tile.
__device__ __forceinline__ void load_k(const Ctx &c, int j)
{
    if (j < c.n_tiles) {
        int tile = c.n_tiles - 1 - j;
        load_tile<BN>(c.sk_base + (j % STAGES) * KV_BYTES, c.k_base + (long long)tile * BN * c.k_row_stride,
                      c.k_row_stride, c.seqlen_k - tile * BN);
    }
}

__device__ __forceinline__ void load_v(const Ctx &c, int j)
{
    if (j < c.n_tiles) {
        int tile = c.n_tiles - 1 - j;
        load_tile<BN>(c.sv_base + (j % STAGES) * KV_BYTES, c.v_base + (long long)tile * BN * c.v_row_stride,
                      c.v_row_stride, c.seqlen_k - tile * BN);
    }
}

__device__ __forceinline__ void load_q_regs(const Ctx &c, State &st)
{
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk)
            load_q_frag(c, mt, kk, st.qf[mt][kk]);
}

// Whether iteration j's tile has keys past the end or right of the causal diagonal.
__device__ __forceinline__ bool needs_mask(const Ctx &c, int j)
{
    int tile = c.n_tiles - 1 - j;
    return (tile + 1) * BN > c.seqlen_k || (CAUSAL && (tile + 1) * BN - 1 > c.q_first + c.diag);
}

// S = Q · Kᵀ for iteration j's tile.
__device__ __forceinline__ void scores(const Ctx &c, const State &st, int j, float (&s)[MT][NT][4])
{
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[mt][nt][e] = 0.f;
    const u32 kst = c.sk_base + (j % STAGES) * KV_BYTES;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
        u32 a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            if (QREG) {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    a[mt][e] = st.qf[mt][kk][e];
            } else {
                load_q_frag(c, mt, kk, a[mt]);
            }
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            u32 b0, b1, b2, b3;
            if (HALF_K && kk == KSTEPS - 1) {
                // Keys np·16 + 0..7 and + 8..15 at the step's first 8 columns; zeros beyond D.
                ldmatrix_x2<false>(kst + tile_offset(np * 16 + (c.lane & 15), 2 * kk), b0, b2);
                b1 = b3 = 0u;
            } else {
                int krow = np * 16 + ((c.lane >> 4) << 3) + (c.lane & 7);
                int kchunk = 2 * kk + ((c.lane >> 3) & 1);
                ldmatrix_x4(kst + tile_offset(krow, kchunk), b0, b1, b2, b3);
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(s[mt][2 * np], a[mt], b0, b1);
                mma16816(s[mt][2 * np + 1], a[mt], b2, b3);
            }
        }
    }
}

// -inf for keys past the end and (causal) keys right of the diagonal.
__device__ __forceinline__ void apply_mask(const Ctx &c, int j, float (&s)[MT][NT][4])
{
    const int tile = c.n_tiles - 1 - j;
    const int g = c.lane >> 2;
    const int t = c.lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int row = c.row0 + mt * 16 + g + 8 * h;
            int limit = c.seqlen_k;
            if (CAUSAL)
                limit = min(limit, row + c.diag + 1);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    int col = tile * BN + nt * 8 + 2 * t + e;
                    if (col >= limit)
                        s[mt][nt][2 * h + e] = NEG_INF;
                }
        }
}

// The online softmax step: new row maxima, S turned into probabilities in place (exp2 with the
// scale folded in), the row sums and O rescaled to the new maxima.
__device__ __forceinline__ void softmax(const Ctx &c, State &st, float (&s)[MT][NT][4])
{
    float alpha[MT][2];
    bool rescale = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = st.m[mt][h];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
            mx = quad_max(mx);
            const float offset = row_offset(mx, c.scale_log2);
            alpha[mt][h] = ex2(st.m[mt][h] * c.scale_log2 - offset);
            rescale |= mx != st.m[mt][h];
            st.m[mt][h] = mx;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float p = ex2(fmaf(s[mt][nt][2 * h + e], c.scale_log2, -offset));
                    s[mt][nt][2 * h + e] = p;
                    sum += p;
                }
            st.l[mt][h] = st.l[mt][h] * alpha[mt][h] + sum;
        }
    // O *= alpha. Once the running maxima settle, most tiles change none of a warp's rows:
    // skip the multiplications by 1 then (the vote keeps the branch warp-uniform).
    if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    st.o[mt][dt][e] *= alpha[mt][e >> 1];
    }
}

// P as mma A fragments: the S accumulators of n8 tiles 2kb and 2kb+1 are exactly the A
// fragment of k-block kb once packed to 16 bits, so no data moves between threads.
__device__ __forceinline__ void pack_p(const float (&s)[MT][NT][4], int kb, u32 (&p)[MT][4])
{
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        p[mt][0] = pack2(s[mt][2 * kb][0], s[mt][2 * kb][1]);
        p[mt][1] = pack2(s[mt][2 * kb][2], s[mt][2 * kb][3]);
        p[mt][2] = pack2(s[mt][2 * kb + 1][0], s[mt][2 * kb + 1][1]);
        p[mt][3] = pack2(s[mt][2 * kb + 1][2], s[mt][2 * kb + 1][3]);
    }
}

// O += P_kb · V for one k-block (16 keys) of iteration j's V tile.
__device__ __forceinline__ void pv_kblock(const Ctx &c, State &st, int j, int kb, const u32 (&p)[MT][4])
{
    const u32 vst = c.sv_base + (j % STAGES) * KV_BYTES;
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
        u32 b0, b1, b2, b3;
        int vrow = kb * 16 + (c.lane & 15);
        int vchunk = 2 * dp + (c.lane >> 4);
        ldmatrix_x4_trans(vst + tile_offset(vrow, vchunk), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            mma16816(st.o[mt][2 * dp], p[mt], b0, b1);
            mma16816(st.o[mt][2 * dp + 1], p[mt], b2, b3);
        }
    }
    if (HALF_K) { // the last n8 tile of O: columns D - 8 .. D - 1
        u32 b0, b1;
        ldmatrix_x2<true>(vst + tile_offset(kb * 16 + (c.lane & 15), DT - 1), b0, b1);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            mma16816(st.o[mt][DT - 1], p[mt], b0, b1);
    }
}

// ---- schedule A (overlap = 0): one tile after the other ------------------------------------
// Loads are issued in the order Q, K0, V0, K1, V1, ..., one cp.async group each: the prologue
// issues Q and K0..K_{S-1}, V0..V_{S-2}; iteration j issues V_{j+S-1} right after its first
// barrier and K_{j+S} right after its second. Before using K_j (or V_j) exactly 2(S-1) newer
// groups may still be in flight. Each k-block of P is packed just before its use, which needs
// fewer registers, by ptxas's count, than packing all of P at once.
template <bool MASK>
__device__ __forceinline__ void sequential_step(const Ctx &c, State &st, int j)
{
    cp_async_wait<2 * STAGES - 2>(); // K_j has landed (this thread's copies) ...
    __syncthreads();                 // ... everyone's; and everyone is done with V_{j-1}
    load_v(c, j + STAGES - 1);
    cp_async_commit();
    if (QREG && j == 0)
        load_q_regs(c, st);
    float s[MT][NT][4];
    scores(c, st, j, s);
    if (MASK)
        apply_mask(c, j, s);
    softmax(c, st, s);
    cp_async_wait<2 * STAGES - 2>(); // V_j has landed ...
    __syncthreads();                 // ... everyone's; and everyone is done with K_j
    load_k(c, j + STAGES);
    cp_async_commit();
#pragma unroll
    for (int kb = 0; kb < BN / 16; ++kb) {
        u32 p[MT][4];
        pack_p(s, kb, p);
        pv_kblock(c, st, j, kb, p);
    }
}

__device__ __forceinline__ void run_sequential(const Ctx &c, State &st, const u16 *q, long long q_row_stride,
                                               int q_valid)
{
    load_tile<BM>(c.sq_base, q, q_row_stride, q_valid);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        load_k(c, s);
        cp_async_commit();
        if (s < STAGES - 1) {
            load_v(c, s);
            cp_async_commit();
        }
    }
    int j = 0;
    for (; j < c.n_tiles && needs_mask(c, j); ++j)
        sequential_step<true>(c, st, j);
    for (; j < c.n_tiles; ++j)
        sequential_step<false>(c, st, j);
}

// ---- schedule B (overlap = 1): P·V of one tile beside Q·Kᵀ of the next ----------------------
// Iteration j issues S_{j+1} = Q·K_{j+1}ᵀ and O += P_j·V_j back to back: the two matrix
// products are independent, so the tensor cores work through both while the same warp's
// softmax of S_{j+1} (exponentials, maxima, sums) follows as soon as S_{j+1} is done. P_j
// stays packed in registers from one iteration to the next. One barrier per tile.
// cp.async groups: G_-1 = {Q, K_0}, G_t = {V_t, K_{t+1}}; the prologue issues G_-1..G_{S-2},
// iteration j needs G_j (S-2 newer groups may be in flight) and then issues G_{j+S-1} into
// the slots freed by iteration j-1 (K_j's and V_{j-1}'s). Needs STAGES >= 2.
__device__ __forceinline__ void run_overlapped(const Ctx &c, State &st, const u16 *q, long long q_row_stride,
                                               int q_valid)
{
    static_assert(!OVERLAP || STAGES >= 2, "overlap needs at least two stages");
    u32 p[BN / 16][MT][4];
    float s[MT][NT][4];

    load_tile<BM>(c.sq_base, q, q_row_stride, q_valid);
    load_k(c, 0);
    cp_async_commit();
#pragma unroll
    for (int t = 0; t + 2 <= STAGES; ++t) {
        load_v(c, t);
        load_k(c, t + 1);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();
    __syncthreads();
    if (QREG)
        load_q_regs(c, st);
    scores(c, st, 0, s);
    if (needs_mask(c, 0))
        apply_mask(c, 0, s);
    softmax(c, st, s);
#pragma unroll
    for (int kb = 0; kb < BN / 16; ++kb)
        pack_p(s, kb, p[kb]);

    for (int j = 0; j < c.n_tiles; ++j) {
        const bool more = j + 1 < c.n_tiles;
        cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
        __syncthreads();
        load_v(c, j + STAGES - 1);
        load_k(c, j + STAGES);
        cp_async_commit();
        if (more) {
            scores(c, st, j + 1, s);
            if (needs_mask(c, j + 1))
                apply_mask(c, j + 1, s);
        }
#pragma unroll
        for (int kb = 0; kb < BN / 16; ++kb)
            pv_kblock(c, st, j, kb, p[kb]);
        if (more) {
            softmax(c, st, s);
#pragma unroll
            for (int kb = 0; kb < BN / 16; ++kb)
                pack_p(s, kb, p[kb]);
        }
    }
}

__device__ __forceinline__ void flash_fwd(const FwdParams &p)
{
    extern __shared__ __align__(128) unsigned char smem[];

    const int head = (int)blockIdx.y;
    const int batch = (int)blockIdx.z;
    // The block's sequence (Seq: in its batch slot, or one of a variable-length batch, whose
    // shorter sequences leave the grid's last blocks without rows).
    const Seq seq = sequence(p, batch);
    const int m_block = (seq.sq + BM - 1) / BM - 1 - (int)blockIdx.x; // the longest causal rows start first
    if (m_block < 0)
        return;
    const int kv_head = head / (p.heads_q / p.heads_kv);
    const int tid = (int)threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int diag = seq.sk - seq.sq;
    const int q_first = m_block * BM;
    const int q_valid = min(BM, seq.sq - q_first);

    const u16 *q = (const u16 *)p.q + seq.q_offset(p, batch) + head * p.q_head_stride + q_first * p.q_row_stride;
    u16 *o = (u16 *)p.o + seq.o_offset(p, batch) + head * p.o_head_stride + q_first * p.o_row_stride;
    float *lse = p.lse ? p.lse + seq.lse_index(p, batch, head, q_first) : nullptr;

    // Keys this block needs: all of them, or (causal) up to the diagonal of its last row.
    const int key_end = keys_seen<CAUSAL>(q_first, q_valid, seq.sk, diag);
    const int n_tiles = key_end > 0 ? (key_end + BN - 1) / BN : 0;

    if (n_tiles == 0) { // every row of the block sees no key
        for (int idx = tid; idx < q_valid * NC; idx += THREADS) {
            int row = idx / NC, chunk = idx % NC;
            *(uint4 *)(o + row * p.o_row_stride + chunk * 8) = make_uint4(0, 0, 0, 0);
        }
        if (lse)
            for (int row = tid; row < q_valid; row += THREADS)
                lse[row] = POS_INF;
        return;
    }

    Ctx c;
    c.sq_base = smem_addr(smem);
    c.sk_base = c.sq_base + Q_BYTES;
    c.sv_base = c.sk_base + STAGES * KV_BYTES;
    c.k_base = (const u16 *)p.k + seq.k_offset(p, batch, p.k_batch_stride, p.k_row_stride) + kv_head * p.k_head_stride;
    c.v_base = (const u16 *)p.v + seq.k_offset(p, batch, p.v_batch_stride, p.v_row_stride) + kv_head * p.v_head_stride;
    c.k_row_stride = p.k_row_stride;
    c.v_row_stride = p.v_row_stride;
    c.seqlen_k = seq.sk;
    c.n_tiles = n_tiles;
    c.row0 = q_first + warp * WARP_ROWS;
    c.diag = diag;
    c.q_first = q_first;
    c.lane = lane;
    c.warp = warp;
    c.scale_log2 = p.scale_log2;

    State st;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            st.m[mt][h] = NEG_INF;
            st.l[mt][h] = 0.f;
        }
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                st.o[mt][dt][e] = 0.f;
    }
    if (OVERLAP)
        run_overlapped(c, st, q, p.q_row_stride, q_valid);
    else
        run_sequential(c, st, q, p.q_row_stride, q_valid);

    // Normalise, write the LSE, stage O in shared memory (over Q's tile) for 16-byte stores.
    const int g = lane >> 2;
    const int t = lane & 3;
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float l = quad_sum(st.l[mt][h]);
            float inv = l > 0.f ? 1.f / l : 0.f;
            int local = warp * WARP_ROWS + mt * 16 + g + 8 * h;
            if (lse && t == 0 && local < q_valid)
                lse[local] = row_lse(st.m[mt][h], l, p.scale_log2);
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                u32 v = pack2(st.o[mt][dt][2 * h] * inv, st.o[mt][dt][2 * h + 1] * inv);
                int col = dt * 8 + 2 * t;
                *(u32 *)(smem + tile_offset(local, col >> 3) + (col & 7) * 2) = v;
            }
        }
    __syncthreads();
    for (int idx = tid; idx < q_valid * NC; idx += THREADS) {
        int row = idx / NC, chunk = idx % NC;
        *(uint4 *)(o + row * p.o_row_stride + chunk * 8) = *(const uint4 *)(smem + tile_offset(row, chunk));
    }
}

} // namespace ft

// The generated entry point: FT_DEFINE_KERNEL(name) at the end of each generated source.
#define FT_DEFINE_KERNEL(name)                                                              \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, 1) name(const ft::FwdParams p) \
    {                                                                                       \
        ft::flash_fwd(p);                                                                   \
    }
