// flash_decode_sm80 — the forward for short queries against long K/V (decode, speculative and
// chunked steps): the keys of one (batch, head) split across CTAs (FlashDecoding), and, PACK, the
// query heads that share a K/V head computed as the rows of one tile, so that each K/V tile is
// read once per group instead of once per query head. mma.sync m16n8k16, ldmatrix and cp.async:
// compute capability 8.0 and newer. The same operation and conventions as flash_fwd_sm80
// (layouts, grouped-query heads, bottom-right causal alignment, a row that sees no key gets O = 0
// and LSE = +inf).
//
// ---- the two kernels, in stream order: main → combine -----------------------------------------
// FT_DEFINE_KERNEL(name) defines name and name##_combine, extern "C", each taking one FwdParams
// by value, THREADS = 32·WARPS threads.
// A CTA's rows: with PACK, the pairs (query i, head g of the K/V head's group), row r = i·G + g
// (G = heads_q / heads_kv), for one K/V head ("unit"); without, the queries of one query head.
// With NRB = ceil(rows / ROWS) row blocks of ROWS = 16·MT rows:
//   name           grid (NRB · splits, units, batch): block x = split · NRB + row block. The CTA
//                  takes the tiles of BN keys its rows see (causal: up to the diagonal of its last
//                  row), split s the s-th of `splits` equal runs of them; warp w of the CTA takes
//                  tiles w, w + WARPS, ... of its run, each warp with its own cp.async ring of
//                  STAGES K and V tiles, STAGES - 1 of them in flight while it computes one (no
//                  barrier of the CTA inside the loop), and its own
//                  online softmax (m, l, O in registers; Q's fragments loaded once). At the end the
//                  warps' (m, l, O) are merged through shared memory, and the CTA writes
//                  splits = 1: O (element type) and the LSE;
//                  splits > 1: its partial O (fp32, normalised by its own sum) and partial LSE
//                  (natural log; -inf where the split saw no key of the row) into the workspace.
//   name##_combine grid (ceil(batch·heads_q·seqlen_q / WARPS)), only when splits > 1: one warp
//                  per row: LSE = log Σ_s exp(LSE_s), O = Σ_s exp(LSE_s − LSE)·O_s.
//
// ---- the workspace (FwdParams::ws, splits > 1 only; 16-byte aligned) -------------------------
// With R = batch·heads_q·seqlen_q and row = (batch·heads_q + head)·seqlen_q + i:
//   o_part   float [splits][R][D]
//   lse_part float [splits][R]
//
// Compile-time parameters, defined by the generated prelude:
//   FTP_D       head dimension (a multiple of 8 from 32 to 256)
//   FTP_BN      keys per tile (a multiple of 16)     FTP_WARPS  warps per CTA (each its own keys)
//   FTP_STAGES  depth of each warp's K/V ring (2..4) FTP_MT     m16 row tiles per CTA (1 or 2)
//   FTP_PACK    1: a CTA's rows are the group's query heads × queries, 0: one query head's queries
//   FTP_CAUSAL  0 or 1      FTP_DTYPE_F16 or FTP_DTYPE_BF16      FT_SMEM_BYTES

#if !defined(FTP_D) || !defined(FTP_BN) || !defined(FTP_WARPS) || !defined(FTP_STAGES) || !defined(FTP_MT) || \
    !defined(FTP_PACK) || !defined(FTP_CAUSAL) || !defined(FT_SMEM_BYTES)
#error "flash_decode_sm80 needs FTP_D, FTP_BN, FTP_WARPS, FTP_STAGES, FTP_MT, FTP_PACK, FTP_CAUSAL and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_decode_sm80 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif

#include "ft_device.cuh"
#include "ft_params.cuh"
#include "ft_sm80.cuh"
#include "ft_softmax.cuh"

namespace ft {

constexpr int D = FTP_D;
constexpr int BN = FTP_BN;
constexpr int WARPS = FTP_WARPS;
constexpr int STAGES = FTP_STAGES;
constexpr int MT = FTP_MT;
constexpr bool PACK = FTP_PACK != 0;
constexpr bool CAUSAL = FTP_CAUSAL != 0;

constexpr int THREADS = WARPS * 32;
constexpr int ROWS = 16 * MT;            // rows per CTA
constexpr int NC = D / 8;                // 16-byte chunks per row
constexpr int KSTEPS = (D + 15) / 16;    // k16 steps of Q·Kᵀ
// An odd multiple of 8 (72, 88, ...): as in flash_fwd_sm80, the last k16 step of Q·Kᵀ loads its
// first 8 columns alone and takes zeros for the rest, and P·V loads O's last n8 tile alone.
constexpr bool HALF_K = D % 16 != 0;
constexpr int NT = BN / 8;               // n8 tiles of S
constexpr int DT = D / 8;                // n8 tiles of O
constexpr int PITCH = (16 * KSTEPS + 8) * 2; // bytes per tile row (see flash_fwd_sm80: no bank conflicts)
constexpr int Q_BYTES = ROWS * PITCH;
constexpr int TILE_BYTES = BN * PITCH;   // one K or one V tile
constexpr int RING_BYTES = STAGES * 2 * TILE_BYTES; // one warp's ring
constexpr int SMEM_BYTES = Q_BYTES + WARPS * RING_BYTES;
// The merge of the warps' results, over the rings once the loop is done: per warp O [ROWS][OP]
// floats, then m and l [ROWS].
constexpr int OP = D + 4;
constexpr int MERGE_WARP = ROWS * (OP + 2); // floats
constexpr int MERGE_BYTES = WARPS * MERGE_WARP * 4;

static_assert(D % 8 == 0 && D >= 32 && D <= 256, "head dimension must be a multiple of 8 from 32 to 256");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 128, "keys per tile: a multiple of 16, at most 128");
static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 stages per warp");
static_assert(MT == 1 || MT == 2, "one or two m16 row tiles");
static_assert(WARPS >= 1 && WARPS <= 8, "1 to 8 warps");
static_assert(MERGE_BYTES <= SMEM_BYTES, "the warps' merge must fit in the shared memory of the loop");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");

__device__ __forceinline__ int tile_offset(int row, int chunk)
{
    return row * PITCH + chunk * 16;
}

// A K or V tile's rows in global memory, 16 at a time: where each group of 16 rows starts. Rows of
// dense K and V follow each other; those of a paged cache lie in the pages its block table names
// (a page holds a multiple of 16 rows, so a group never straddles two).
constexpr int GROUPS = BN / 16;
struct TileSrc {
    const u16 *group[GROUPS];
};

// One warp copies BN rows of D elements from src (row stride in elements) into a tile of its ring;
// rows at or beyond `valid` are zero-filled.
__device__ __forceinline__ void load_kv_tile(u32 dst, const TileSrc &src, long long row_stride, int valid, int lane)
{
    constexpr int CHUNKS = BN * NC;
    constexpr int ITERS = (CHUNKS + 31) / 32;
    if (32 % NC == 0) {
        // Each lane keeps one column chunk and steps down the rows; ROW_STEP divides 16, so the
        // group of each step is known at compile time.
        constexpr int ROW_STEP = 32 % NC == 0 ? 32 / NC : 1;
        const int row0 = lane / NC;
        const int chunk = lane % NC;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int row = row0 + it * ROW_STEP;
            const bool ok = row < valid;
            const u16 *g = src.group[it * ROW_STEP / 16] + (row0 + it * ROW_STEP % 16) * row_stride + chunk * 8;
            cp_async16(dst + tile_offset(row, chunk), ok ? g : src.group[0], ok ? 16 : 0);
        }
    } else {
        // Head dims whose chunk count does not divide 32 (96, 160, 192, 224, the odd multiples of 8;
        // at those the lanes of the last step that are past the tile's chunks copy nothing).
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int idx = it * 32 + lane;
            if (CHUNKS % 32 != 0 && idx >= CHUNKS)
                break;
            const int row = idx / NC, chunk = idx % NC;
            const bool ok = row < valid;
            const u16 *base = src.group[0];
#pragma unroll
            for (int gi = 1; gi < GROUPS; ++gi)
                if (row >= 16 * gi)
                    base = src.group[gi];
            cp_async16(dst + tile_offset(row, chunk), ok ? base + (row % 16) * row_stride + chunk * 8 : src.group[0],
                       ok ? 16 : 0);
        }
    }
}

// Where a CTA's rows come from: row r of the CTA's block is query `query(r)` of head `head(r)`.
struct Rows {
    int first;  // the block's first row
    int count;  // its rows that exist (at most ROWS)
    int hpu;    // query heads per unit: G with PACK, else 1
    int unit;   // the K/V head (PACK) or the query head
    __device__ __forceinline__ int query(int r) const { return (first + r) / hpu; }
    __device__ __forceinline__ int head(int r) const { return unit * hpu + (first + r) % hpu; }
};

// One warp's state over its tiles.
struct State {
    float o[MT][DT][4]; // unnormalised output, mma C layout
    float m[MT][2];     // running maximum of the raw scores of rows g and g+8
    float l[MT][2];     // this thread's part of the running sum
    u32 qf[MT][KSTEPS][4];
    int limit[MT][2];   // one past the last key the row sees
};

// S = Q·Kᵀ of the tile in K slot kst.
__device__ __forceinline__ void scores(const State &st, u32 kst, int lane, float (&s)[MT][NT][4])
{
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[mt][nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            u32 b0, b1, b2, b3;
            if (HALF_K && kk == KSTEPS - 1) {
                ldmatrix_x2<false>(kst + tile_offset(np * 16 + (lane & 15), 2 * kk), b0, b2);
                b1 = b3 = 0u;
            } else {
                const int krow = np * 16 + ((lane >> 4) << 3) + (lane & 7);
                const int kchunk = 2 * kk + ((lane >> 3) & 1);
                ldmatrix_x4(kst + tile_offset(krow, kchunk), b0, b1, b2, b3);
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(s[mt][2 * np], st.qf[mt][kk], b0, b1);
                mma16816(s[mt][2 * np + 1], st.qf[mt][kk], b2, b3);
            }
        }
}

// -inf for the keys of tile `tile` at or past each row's limit.
__device__ __forceinline__ void apply_mask(const State &st, int tile, int lane, float (&s)[MT][NT][4])
{
    const int t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (tile * BN + nt * 8 + 2 * t + e >= st.limit[mt][h])
                        s[mt][nt][2 * h + e] = NEG_INF;
}

// The online softmax step (as flash_fwd_sm80's): new maxima, S into probabilities, sums, O rescaled.
__device__ __forceinline__ void softmax(State &st, float scale_log2, float (&s)[MT][NT][4])
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
            const float offset = row_offset(mx, scale_log2);
            alpha[mt][h] = ex2(st.m[mt][h] * scale_log2 - offset);
            rescale |= mx != st.m[mt][h];
            st.m[mt][h] = mx;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float p = ex2(fmaf(s[mt][nt][2 * h + e], scale_log2, -offset));
                    s[mt][nt][2 * h + e] = p;
                    sum += p;
                }
            st.l[mt][h] = st.l[mt][h] * alpha[mt][h] + sum;
        }
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

// O += P·V for the tile in V slot vst, P's k-blocks packed from the S accumulators as they are used.
__device__ __forceinline__ void pv(State &st, u32 vst, int lane, const float (&s)[MT][NT][4])
{
#pragma unroll
    for (int kb = 0; kb < BN / 16; ++kb) {
        u32 p[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            p[mt][0] = pack2(s[mt][2 * kb][0], s[mt][2 * kb][1]);
            p[mt][1] = pack2(s[mt][2 * kb][2], s[mt][2 * kb][3]);
            p[mt][2] = pack2(s[mt][2 * kb + 1][0], s[mt][2 * kb + 1][1]);
            p[mt][3] = pack2(s[mt][2 * kb + 1][2], s[mt][2 * kb + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
            u32 b0, b1, b2, b3;
            const int vrow = kb * 16 + (lane & 15);
            const int vchunk = 2 * dp + (lane >> 4);
            ldmatrix_x4_trans(vst + tile_offset(vrow, vchunk), b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(st.o[mt][2 * dp], p[mt], b0, b1);
                mma16816(st.o[mt][2 * dp + 1], p[mt], b2, b3);
            }
        }
        if (HALF_K) { // the last n8 tile of O
            u32 b0, b1;
            ldmatrix_x2<true>(vst + tile_offset(kb * 16 + (lane & 15), DT - 1), b0, b1);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                mma16816(st.o[mt][DT - 1], p[mt], b0, b1);
        }
    }
}

template <bool MASK>
__device__ __forceinline__ void tile_step(State &st, u32 kst, u32 vst, int tile, int lane, float scale_log2)
{
    float s[MT][NT][4];
    scores(st, kst, lane, s);
    if (MASK)
        apply_mask(st, tile, lane, s);
    softmax(st, scale_log2, s);
    pv(st, vst, lane, s);
}

__device__ __forceinline__ void flash_decode(const FwdParams &p)
{
    extern __shared__ __align__(128) unsigned char smem[];

    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int group = p.heads_q / p.heads_kv;
    Rows rows;
    rows.hpu = PACK ? group : 1;
    const int nrb = (p.seqlen_q * rows.hpu + ROWS - 1) / ROWS;
    const int split = (int)blockIdx.x / nrb, splits = p.splits > 1 ? p.splits : 1;
    const int batch = (int)blockIdx.z;
    const Seq seq = sequence(p, batch);
    rows.first = ((int)blockIdx.x % nrb) * ROWS;
    rows.count = min(ROWS, seq.sq * rows.hpu - rows.first);
    if (rows.count <= 0)
        return; // past the sequence's queries (a variable-length batch's shorter ones)
    rows.unit = (int)blockIdx.y;
    const int kv_head = PACK ? rows.unit : rows.unit / group;
    const int sk = seq.sk;
    const int diag = sk - seq.sq;

    // The keys the block's rows see, in tiles of BN, and this split's run of them.
    const int key_end = CAUSAL ? min(sk, rows.query(rows.count - 1) + diag + 1) : sk;
    const int key_min = CAUSAL ? min(sk, rows.query(0) + diag + 1) : sk;
    const int n_tiles = key_end > 0 ? (key_end + BN - 1) / BN : 0;
    const int per_split = (n_tiles + splits - 1) / splits;
    const int t_begin = min(n_tiles, split * per_split), t_end = min(n_tiles, t_begin + per_split);

    // Q of the block's rows, zero-filled past the last, into shared memory; then fragments.
    const u32 sq_base = smem_addr(smem);
    const u16 *qg = (const u16 *)p.q + seq.q_offset(p, batch);
    for (int idx = tid; idx < ROWS * NC; idx += THREADS) {
        const int r = idx / NC, chunk = idx % NC;
        const bool ok = r < rows.count;
        const u16 *src = ok ? qg + rows.query(r) * p.q_row_stride + rows.head(r) * p.q_head_stride + chunk * 8 : qg;
        cp_async16(sq_base + tile_offset(r, chunk), src, ok ? 16 : 0);
    }
    cp_async_commit();

    // This warp's tiles: t_begin + warp, + WARPS, ...; its ring after Q's tile.
    const int first_tile = t_begin + warp;
    const int n_mine = t_end > first_tile ? (t_end - first_tile + WARPS - 1) / WARPS : 0;
    const u32 ring = sq_base + Q_BYTES + warp * RING_BYTES;
    // Dense K and V: the sequence's rows from kg, vg. Paged: kg, vg are the pools' starts for the
    // K/V head, the sequence's pages in bt, and pg holds the page numbers of a tile's row groups,
    // fetched one load ahead of their use so that the copies do not wait on the table.
    const bool paged = p.block_table != nullptr;
    const u16 *kg = (const u16 *)p.k + (paged ? 0 : seq.k_offset(p, batch, p.k_batch_stride, p.k_row_stride)) +
                    kv_head * p.k_head_stride;
    const u16 *vg = (const u16 *)p.v + (paged ? 0 : seq.k_offset(p, batch, p.v_batch_stride, p.v_row_stride)) +
                    kv_head * p.v_head_stride;
    const int *bt = paged ? p.block_table + (long long)batch * p.block_table_stride : nullptr;
    int pg[GROUPS];
    auto fetch_pages = [&](int j) {
#pragma unroll
        for (int gi = 0; gi < GROUPS; ++gi) {
            const int key = (first_tile + j * WARPS) * BN + 16 * gi;
            pg[gi] = paged && j < n_mine && key < sk ? bt[key / p.page_size] : 0;
        }
    };
    auto load = [&](int j) {
        if (j < n_mine) {
            const int tile = first_tile + j * WARPS;
            const u32 slot = ring + (j % STAGES) * 2 * TILE_BYTES;
            TileSrc ks, vs;
#pragma unroll
            for (int gi = 0; gi < GROUPS; ++gi) {
                const int key = tile * BN + 16 * gi;
                if (paged) {
                    const int r = key % p.page_size;
                    ks.group[gi] = kg + pg[gi] * p.k_batch_stride + r * p.k_row_stride;
                    vs.group[gi] = vg + pg[gi] * p.v_batch_stride + r * p.v_row_stride;
                } else {
                    ks.group[gi] = kg + (long long)key * p.k_row_stride;
                    vs.group[gi] = vg + (long long)key * p.v_row_stride;
                }
            }
            load_kv_tile(slot, ks, p.k_row_stride, sk - tile * BN, lane);
            load_kv_tile(slot + TILE_BYTES, vs, p.v_row_stride, sk - tile * BN, lane);
        }
        cp_async_commit(); // one group per j, empty or not: the wait counts stay fixed
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        fetch_pages(s);
        load(s);
    }
    fetch_pages(STAGES - 1);

    State st;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            st.m[mt][h] = NEG_INF;
            st.l[mt][h] = 0.f;
            const int r = mt * 16 + g + 8 * h;
            st.limit[mt][h] = CAUSAL && r < rows.count ? min(sk, rows.query(r) + diag + 1) : sk;
        }
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                st.o[mt][dt][e] = 0.f;
    }
    cp_async_wait<STAGES - 1>(); // Q (the oldest group) has landed, this thread's part ...
    __syncthreads();             // ... and everyone's
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            if (HALF_K && kk == KSTEPS - 1) { // columns past D are zeros
                ldmatrix_x2<false>(sq_base + tile_offset(mt * 16 + (lane & 15), 2 * kk), st.qf[mt][kk][0],
                                   st.qf[mt][kk][1]);
                st.qf[mt][kk][2] = st.qf[mt][kk][3] = 0u;
            } else {
                ldmatrix_x4(sq_base + tile_offset(mt * 16 + (lane & 15), 2 * kk + (lane >> 4)), st.qf[mt][kk][0],
                            st.qf[mt][kk][1], st.qf[mt][kk][2], st.qf[mt][kk][3]);
            }
        }

    // The warp's pipeline: tile j + STAGES - 1 is issued into the slot of tile j - 1 before
    // waiting for tile j, so STAGES - 1 tiles stay in flight while one is computed.
    for (int j = 0; j < n_mine; ++j) {
        __syncwarp(); // every lane is done with tile j - 1
        load(j + STAGES - 1);
        fetch_pages(j + STAGES);
        cp_async_wait<STAGES - 1>();
        __syncwarp(); // every lane's copies of tile j are visible
        const int tile = first_tile + j * WARPS;
        const u32 slot = ring + (j % STAGES) * 2 * TILE_BYTES;
        if ((tile + 1) * BN > key_min)
            tile_step<true>(st, slot, slot + TILE_BYTES, tile, lane, p.scale_log2);
        else
            tile_step<false>(st, slot, slot + TILE_BYTES, tile, lane, p.scale_log2);
    }
    cp_async_wait<0>();
    __syncthreads(); // every warp is done with its ring: the merge area is free

    // Each warp's m, l and unnormalised O into the merge area.
    float *mine = (float *)smem + warp * MERGE_WARP;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mt * 16 + g + 8 * h;
            const float l = quad_sum(st.l[mt][h]);
            if (t == 0) {
                mine[ROWS * OP + r] = st.m[mt][h];
                mine[ROWS * OP + ROWS + r] = l;
            }
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *(float2 *)&mine[r * OP + dt * 8 + 2 * t] = make_float2(st.o[mt][dt][2 * h], st.o[mt][dt][2 * h + 1]);
        }
    __syncthreads();

    // Merge: per row the largest maximum M, the rescaled sum L and O; then one split's result out.
    const float *all = (const float *)smem;
    const long long nrows = (long long)p.batch * p.heads_q * p.seqlen_q;
    for (int idx = tid; idx < rows.count * (D / 4); idx += THREADS) {
        const int r = idx / (D / 4), c = (idx % (D / 4)) * 4;
        float mx = NEG_INF;
#pragma unroll
        for (int w = 0; w < WARPS; ++w)
            mx = fmaxf(mx, all[w * MERGE_WARP + ROWS * OP + r]);
        float l = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            const float *wm = all + w * MERGE_WARP;
            const float mw = wm[ROWS * OP + r];
            const float f = mw == NEG_INF ? 0.f : ex2((mw - mx) * p.scale_log2);
            const float4 ow = *(const float4 *)&wm[r * OP + c];
            l += f * wm[ROWS * OP + ROWS + r];
            acc.x += f * ow.x, acc.y += f * ow.y, acc.z += f * ow.z, acc.w += f * ow.w;
        }
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int i = rows.query(r), head = rows.head(r);
        const long long row = ((long long)batch * p.heads_q + head) * p.seqlen_q + i;
        if (splits == 1) {
            u16 *o = (u16 *)p.o + seq.o_offset(p, batch) + i * p.o_row_stride + head * p.o_head_stride + c;
            *(uint2 *)o = make_uint2(pack2(acc.x * inv, acc.y * inv), pack2(acc.z * inv, acc.w * inv));
            if (c == 0 && p.lse)
                p.lse[seq.lse_index(p, batch, head, i)] = row_lse(mx, l, p.scale_log2);
        } else {
            float *o = p.ws + ((long long)split * nrows + row) * D + c;
            *(float4 *)o = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
            if (c == 0)
                p.ws[(long long)splits * nrows * D + (long long)split * nrows + row] =
                    l > 0.f ? row_lse(mx, l, p.scale_log2) : NEG_INF;
        }
    }
}

// One warp per row of every (batch, head, query): the splits' partial results into O and the LSE.
// The weights exp(LSE_s − LSE) of 32 splits at a time are computed by the lanes, one each, and
// broadcast; the partial rows' loads do not wait on them, so several are in flight at once.
__device__ __forceinline__ void flash_decode_combine(const FwdParams &p)
{
    // Columns per lane: lane + 32·k; the last k of a head dim that is not a multiple of 32 (80,
    // 112, ...) has columns for the first half of the lanes only.
    constexpr int CPL = (D + 31) / 32;
    const int lane = (int)threadIdx.x & 31;
    const long long nrows = (long long)p.batch * p.heads_q * p.seqlen_q;
    const long long row = (long long)blockIdx.x * WARPS + ((int)threadIdx.x >> 5);
    const int splits = p.splits;
    if (row >= nrows)
        return;
    const float *lse_part = p.ws + (long long)splits * nrows * D + row;
    float mx = NEG_INF;
    for (int s = lane; s < splits; s += 32)
        mx = fmaxf(mx, lse_part[(long long)s * nrows]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.f;
    if (mx != NEG_INF)
        for (int s = lane; s < splits; s += 32)
            sum += __expf(lse_part[(long long)s * nrows] - mx);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float lse = mx == NEG_INF ? POS_INF : mx + __logf(sum);
    float acc[CPL];
#pragma unroll
    for (int k = 0; k < CPL; ++k)
        acc[k] = 0.f;
    if (mx != NEG_INF)
        for (int s0 = 0; s0 < splits; s0 += 32) {
            // A split that saw no key of the row has LSE_s = -inf (weight 0) and O_s = 0.
            const float w_lane = s0 + lane < splits ? __expf(lse_part[(long long)(s0 + lane) * nrows] - lse) : 0.f;
            const int n = min(32, splits - s0);
            const float *o = p.ws + ((long long)s0 * nrows + row) * D + lane;
#pragma unroll 8
            for (int j = 0; j < n; ++j) {
                const float w = __shfl_sync(0xffffffffu, w_lane, j);
#pragma unroll
                for (int k = 0; k < CPL; ++k)
                    if (D % 32 == 0 || lane + 32 * k < D)
                        acc[k] += w * o[(long long)j * nrows * D + 32 * k];
            }
        }
    // The row's place, after the loop (its 64-bit divisions are calls that would spill live
    // registers inside it); a row past its sequence's queries (a variable-length batch's shorter
    // ones) had no partial results and writes nothing.
    const int i = (int)(row % p.seqlen_q);
    const long long bh = row / p.seqlen_q;
    const int head = (int)(bh % p.heads_q), batch = (int)(bh / p.heads_q);
    const Seq seq = sequence(p, batch);
    if (i >= seq.sq)
        return;
    u16 *o = (u16 *)p.o + seq.o_offset(p, batch) + i * p.o_row_stride + head * p.o_head_stride + lane;
#pragma unroll
    for (int k = 0; k < CPL; ++k)
        if (D % 32 == 0 || lane + 32 * k < D)
            o[32 * k] = (u16)(pack2(acc[k], 0.f) & 0xffffu);
    if (lane == 0 && p.lse)
        p.lse[seq.lse_index(p, batch, head, i)] = lse;
}

} // namespace ft

// The generated entry points: FT_DEFINE_KERNEL(name) at the end of each generated source.
#define FT_DEFINE_KERNEL(name)                                                                        \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, 1) name(const ft::FwdParams p)           \
    {                                                                                                 \
        ft::flash_decode(p);                                                                          \
    }                                                                                                 \
    extern "C" __global__ void __launch_bounds__(ft::THREADS) name##_combine(const ft::FwdParams p)   \
    {                                                                                                 \
        ft::flash_decode_combine(p);                                                                  \
    }
