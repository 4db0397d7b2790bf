// flash_bwd_sm80 — FlashAttention-2-style backward kernels for compute capability 8.0 and newer.
//
// Given Q, K, V, the forward's O and LSE, and dO, computes dQ, dK and dV by recomputing the
// probabilities tile by tile:
//   P = exp(scale·S − LSE), S = Q·Kᵀ;   dV = Pᵀ·dO;   dP = dO·Vᵀ;   D = rowsum(dO ∘ O);
//   dS = P ∘ (dP − D);   dQ = scale·dS·K;   dK = scale·dSᵀ·Q.
// All products run on mma.sync.m16n8k16 with fp16 or bf16 operands and fp32 accumulation; P and
// dS are rounded to the element type before the products that take them as operands.
//
// Conventions (the forward's contract, templates/flash_fwd_sm80.cuh):
//   * Q, O, dO, dQ: [batch, seqlen_q, heads_q, DH]; K, V, dK, dV: [batch, seqlen_k, heads_kv, DH];
//     batch, row and head strides are free (in elements, multiples of 8), the head dimension is
//     contiguous, base pointers are 16-byte aligned.
//   * Grouped-query attention: Q head h reads K/V head h / (heads_q / heads_kv); dK and dV of a
//     K/V head are sums over the query heads of its group.
//   * Causal masking is aligned to the bottom-right corner: row i sees key j iff
//     j <= i + seqlen_k - seqlen_q. A row that sees no key has LSE = +inf (and O = 0) and
//     contributes nothing: its dQ is 0 and it adds nothing to dK or dV.
//   * LSE is fp32 [batch, heads_q, seqlen_q], natural logarithm, in the units of scale·s.
//
// ---- the three kernels, in stream order: pre → main → post ----------------------------------
// FT_DEFINE_KERNEL(name) defines name##_pre, name and name##_post, all extern "C", all taking
// one BwdParams by value, all with THREADS = 32·WARPS threads per block. Let
//   MBQ = ceil(seqlen_q / BM) (query blocks), NBK = ceil(seqlen_k / BN) (key blocks),
//   KVACC = (gqa == atomic && heads_q > heads_kv)  (dK and dV summed in fp32 in the workspace).
//   name##_pre   grid (MBQ, heads_q, batch), no dynamic shared memory. For its query block:
//                D = rowsum(dO ∘ O) in fp32 and LSE·log2(e) into the workspace (padding rows:
//                D = 0 and +inf, so that their P is 0; a +inf LSE stays +inf, and
//                exp2(x − inf) = 0), zeroes its dQ accumulator tile and its dQ semaphore, and,
//                with KVACC, its share of the dK/dV accumulators and their semaphores.
//                Nothing needs to be zeroed by the host: pre initialises the whole workspace.
//   name         grid (NBK, gqa == loop ? heads_kv : heads_q, batch), FT_SMEM_BYTES of dynamic
//                shared memory (past 48 KiB: raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
//                One CTA per key block (key block blockIdx.x, or NBK-1-blockIdx.x with det and
//                causal masking): loads its BN rows of K and V once, then loops over the
//                query blocks that see them (causal: from the first row that sees the block's
//                first key) — with gqa=loop over every query head of its K/V group in turn —
//                recomputes S and P, accumulates dK and dV in registers, and adds its dQ
//                partials in fp32 to the workspace with red.global.add (four floats per
//                instruction on sm_90). Without KVACC it writes dK (scaled) and dV itself; with
//                KVACC it adds them in fp32 to the workspace.
//   name##_post  grid (KVACC ? max(MBQ, NBK) : MBQ, heads_q, batch), no dynamic shared memory.
//                Block (x, h, b): dQ accumulator tile x of query head h → dQ · scale in the
//                element type; with KVACC and h < heads_kv, x < NBK, also the dK and dV
//                accumulator rows of key block x of K/V head h → dK, dV.
//
// ---- the workspace (BwdParams::ws, 16-byte aligned; 256 recommended) --------------------------
// With SQP = MBQ·BM, SKP = NBK·BN and D the tiles' width (DH rounded up to 16), in this order,
// each region starting where the last ends:
//   dq_acc  float [batch][heads_q][MBQ][BM·D]   dQ partial sums, one BM×D tile per query block,
//                                               stored in the order the main kernel's threads
//                                               hold them (dq_index below)
//   lse2    float [batch][heads_q][SQP]         LSE·log2(e); +inf on padding rows
//   dsum    float [batch][heads_q][SQP]         D = rowsum(dO ∘ O); 0 on padding rows
//   dk_acc  float [batch][heads_kv][SKP][D]     only with KVACC: scale·dK, summed over the group
//   dv_acc  float [batch][heads_kv][SKP][D]     only with KVACC
//   dq_sem  int   [batch][heads_q][MBQ]         only with det=1: dQ tiles' addition counters
//   kv_sem  int   [batch][heads_kv][NBK]        only with det=1 and KVACC
// Size in bytes:
//   4·b·hq·SQP·(D + 2) + KVACC·8·b·hkv·SKP·D + det·4·b·hq·MBQ + det·KVACC·4·b·hkv·NBK.
//
// ---- the main kernel's work split ------------------------------------------------------------
// The WARPS warps form WN = WARPS/SPLIT key groups of KEYS_W = BN/WN keys (one or two m16 tiles)
// and SPLIT parts. Warp w = part·WN + kg:
//   * computes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for its key group's KEYS_W keys and the BM/SPLIT query
//     rows of its part (keys are the mma's M dimension, queries its N), so that each thread holds
//     whole m16n8 accumulator tiles of Pᵀ and dSᵀ;
//   * accumulates dV = Pᵀ·dO and dK = dSᵀ·Q for its key group and the D/SPLIT columns of its
//     part. With SPLIT = 1 the 16-bit Pᵀ and dSᵀ accumulators are already the mma A operands of
//     these products (the k dimension is the queries) and never leave the registers; with
//     SPLIT = 2 the two parts exchange them through shared memory;
//   * for dQ = dS·K (k = the BN keys, across every key group) dSᵀ goes to shared memory, and
//     the warps split the BM×D tile of dQ into a WMQ × WDQ grid of TMQ × TDQ tiles (the
//     squarest that the shapes allow; dq_layout below), whose fp32 partials are added to the
//     workspace.
// Per query block (iteration it): wait for its Q, dO, LSE·log2(e) and D (cp.async) and
// barrier; with STAGES = 2 start the loads of iteration it+1 into the other buffer; S, dP, P,
// dS; dSᵀ (and with SPLIT = 2 Pᵀ) to shared memory; dV, dK; barrier; with STAGES = 1 start the
// loads of it+1 into the only buffer; dQ = dS·K and its atomic addition.
//
// ---- deterministic mode (det = 1) ------------------------------------------------------------
// The additions into each dQ tile happen in a fixed order of key blocks: before adding its
// partial for query block m, a CTA waits (one thread spinning on an acquire load, then a
// barrier) until the tile's counter equals its place in that order, and after adding it
// releases the next place (+1). Every CTA waited on has a lower linear block index, so it is
// resident or done: no deadlock, however many CTAs fit at once.
//   * Without causal masking every key block touches every query block; the order is key block
//     0, 1, ... Key block n then starts n iterations late (a wavefront): about NBK/2 iterations
//     per CTA on top of its MBQ of work, plus three barriers per iteration.
//   * With causal masking the key blocks touching query block m are 0 .. n_last(m); the order is
//     n_last(m) down to 0, and the CTAs are launched in descending key-block order (blockIdx.x
//     = NBK-1-n, shortest walks first), so that a CTA reaches query block m about when its turn
//     comes (key block n+1 reached m one iteration earlier): hardly any waiting, at the price of
//     starting the longest walks last. (Ascending order would leave each CTA spinning until the
//     whole wavefront had passed: about twice the time.)
// With KVACC the dK/dV additions wait the same way for the query heads of the group in order.
// Measured on an H200 (tests/bwd/README.md): about −20 % at d = 128, causal or not.
// Compile-time parameters, defined by the generated prelude:
//   FTP_D        DH, the head dimension (a multiple of 8 from 32 to 256; the tiles are D wide,
//                DH rounded up to 16: see D below)
//   FTP_BM       query rows per block of the loop    FTP_BN     keys per CTA
//   FTP_WARPS    4 or 8                               FTP_SPLIT  1 or 2 parts per key group
//   FTP_STAGES   1 or 2 buffers of Q/dO/LSE/D         FTP_CAUSAL 0 or 1
//   FTP_DET      0 or 1: deterministic dQ (and dK/dV with gqa=atomic)
//   FTP_GQA_LOOP or FTP_GQA_ATOMIC;  FTP_DTYPE_F16 or FTP_DTYPE_BF16;  FT_SMEM_BYTES
// The shared device code comes from templates/include/, whose text the generator writes in place
// of the #include lines, so a generated kernel compiles on its own with NVRTC and with nvcc.

#if !defined(FTP_D) || !defined(FTP_BM) || !defined(FTP_BN) || !defined(FTP_WARPS) || !defined(FTP_SPLIT) ||  \
    !defined(FTP_STAGES) || !defined(FTP_CAUSAL) || !defined(FTP_DET) || !defined(FT_SMEM_BYTES)
#error "flash_bwd_sm80 needs FTP_D, FTP_BM, FTP_BN, FTP_WARPS, FTP_SPLIT, FTP_STAGES, FTP_CAUSAL, FTP_DET and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_bwd_sm80 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif
#if defined(FTP_GQA_LOOP) == defined(FTP_GQA_ATOMIC)
#error "flash_bwd_sm80 needs exactly one of FTP_GQA_LOOP and FTP_GQA_ATOMIC"
#endif

#include "ft_device.cuh"
#include "ft_params_bwd.cuh"
#include "ft_bwd_pre.cuh"
#include "ft_sm80.cuh"
#include "ft_atomic.cuh"

namespace ft {

constexpr int DH = FTP_D; // the head dim: the columns of every tensor in global memory
// The tiles' width D: the head dim rounded up to whole k16 steps. The loads fill a tile's D − DH
// columns past the head dim with zeros, so every product adds zeros there and the gradients'
// columns there are zeros, never stored; the workspace's dQ (and dK/dV) accumulators are D wide
// too (ops/bwd.c sizes them alike, from the launch facts' tile_dim).
constexpr int D = (DH + 15) / 16 * 16;
constexpr int BM = FTP_BM;
constexpr int BN = FTP_BN;
constexpr int WARPS = FTP_WARPS;
constexpr int SPLIT = FTP_SPLIT;
constexpr int STAGES = FTP_STAGES;
constexpr bool CAUSAL = FTP_CAUSAL != 0;
constexpr bool DET = FTP_DET != 0;
#if defined(FTP_DTYPE_BF16)
constexpr bool BF16 = true;
#else
constexpr bool BF16 = false;
#endif
#if defined(FTP_GQA_ATOMIC)
constexpr bool GQA_ATOMIC = true;
#else
constexpr bool GQA_ATOMIC = false;
#endif

constexpr int THREADS = WARPS * 32;
constexpr int WN = WARPS / SPLIT;  // key groups
constexpr int MK = BN / (16 * WN); // m16 tiles of keys per warp
constexpr int KEYS_W = 16 * MK;    // keys per warp
constexpr int BMS = BM / SPLIT;    // query rows per warp in S and dP
constexpr int NTQ = BMS / 8;       // n8 tiles of queries per warp in S and dP
constexpr int DS = D / SPLIT;      // dK/dV columns per warp
constexpr int NTK = DS / 8;        // n8 tiles of dK/dV per warp
constexpr int KSTEPS = D / 16;     // k16 steps of S and dP
constexpr int NC = D / 8;          // 16-byte chunks per row of the Q, K, V and dO tiles
constexpr int NCG = DH / 8;        // of them, those of a row in global memory (the rest zeros)
constexpr int SCH = NTQ < 4 ? NTQ : 4; // n8 tiles of Sᵀ computed at a time (32 queries)

// The dQ product's warp grid: WMQ warps along the BM query rows, WARPS/WMQ along the D columns,
// each tile a multiple of 16 rows and of DQ_COLS columns, the squarest one (fewest shared-memory
// loads per mma: a TMQ × TDQ tile takes TMQ/16 + TDQ/16 loads per 2·(TMQ/16)·(TDQ/16) mmas);
// among equals the one with more warps along the rows. 0 when none exists. DQ_COLS is 16 (pairs
// of n8 tiles, ldmatrix.x4), except at head dims that are odd multiples of 16 (80, 112, ...),
// which no split of the columns in 16s divides: there 8, so that two warps can share the
// columns, each an odd number of n8 tiles (gemm_dq loads the last one alone), and BM = 64 takes
// 8 warps. (At multiples of 32 the grids stay those of 16, and the spaces those they were.)
constexpr int DQ_COLS = D % 32 == 0 ? 16 : 8;
__host__ __device__ constexpr int dq_cost(int wm)
{
    return (WARPS % wm != 0 || BM % (16 * wm) != 0 || D % (DQ_COLS * (WARPS / wm)) != 0)
               ? 1 << 30
               : BM / wm + D / (WARPS / wm);
}
__host__ __device__ constexpr int dq_layout()
{
    int best = 0, cost = 1 << 30;
    for (int wm = WARPS; wm >= 1; wm /= 2)
        if (dq_cost(wm) < cost) {
            cost = dq_cost(wm);
            best = wm;
        }
    return best;
}
constexpr int WMQ = dq_layout();
constexpr int WDQ = WMQ > 0 ? WARPS / WMQ : 1;
constexpr int TMQ = WMQ > 0 ? BM / WMQ : 16; // dQ rows per warp
constexpr int TDQ = D / WDQ;                 // dQ columns per warp
constexpr int MTQ = TMQ / 16;                // m16 tiles of dQ per warp
constexpr int NTD = TDQ / 8;                 // n8 tiles of dQ per warp
constexpr int FR = MTQ * NTD;                // m16n8 fragments of dQ per warp

// ---- shared-memory layout ------------------------------------------------------------------
// K, V, Q and dO tiles are row-major with a pitch of D + 8 elements, the dS and P tiles
// [key][query] with a pitch of BM + 8: one spare 16-byte chunk per row, so that the eight rows
// of one ldmatrix phase start an odd number of chunks apart (D/8 + 1 and BM/8 + 1 are odd: D and
// BM are multiples of 16) and fall in eight different bank groups, and every address is a
// per-lane base plus a constant.
// The same pitches make the fragment stores (8 rows × 4 words per warp) conflict-free.
constexpr int PITCH = (D + 8) * 2;   // bytes per row of K, V, Q, dO
constexpr int SPITCH = (BM + 8) * 2; // bytes per row of dS and P
constexpr int KV_TILE = BN * PITCH;
constexpr int Q_TILE = BM * PITCH;
constexpr int S_TILE = BN * SPITCH;
constexpr int OFF_K = 0;
constexpr int OFF_V = OFF_K + KV_TILE;
constexpr int OFF_Q = OFF_V + KV_TILE;              // STAGES tiles
constexpr int OFF_DO = OFF_Q + STAGES * Q_TILE;     // STAGES tiles
constexpr int OFF_DS = OFF_DO + STAGES * Q_TILE;    // dSᵀ, 16-bit, [key][query]
constexpr int OFF_P = OFF_DS + S_TILE;              // Pᵀ, only with SPLIT = 2
constexpr int OFF_LSE = OFF_P + (SPLIT > 1 ? S_TILE : 0); // STAGES × BM floats: LSE·log2(e)
constexpr int OFF_DSUM = OFF_LSE + STAGES * BM * 4;       // STAGES × BM floats: D
constexpr int SMEM_BYTES = OFF_DSUM + STAGES * BM * 4;

static_assert(DH % 8 == 0 && DH >= 32 && DH <= 256, "head dimension must be a multiple of 8 from 32 to 256");
static_assert(WARPS == 4 || WARPS == 8, "4 or 8 warps");
static_assert(SPLIT == 1 || SPLIT == 2, "1 or 2 parts per key group");
// dK and dV take their B operands, Q and dO, 16 columns at a time (ldmatrix.x4.trans: two n8
// tiles per load); with SPLIT = 2 at a head dim that is an odd multiple of 16 (144, 176, ...)
// each part has an odd number of n8 tiles, whose last one gemm_kv_smem loads alone (.x2).
static_assert(DS % 8 == 0 && (SPLIT == 2 || NTK % 2 == 0), "each part's dK/dV columns: whole n8 tiles, "
                                                            "in pairs unless split = 2");
static_assert(STAGES == 1 || STAGES == 2, "1 or 2 Q/dO buffers");
static_assert(BN % (16 * WN) == 0 && (MK == 1 || MK == 2), "each warp owns one or two m16 tiles of keys");
static_assert(BM % (16 * SPLIT) == 0 && BM >= 16 && BM <= 128, "each part owns a multiple of 16 query rows");
static_assert(BM / 2 <= THREADS, "one thread per 16 bytes of LSE and D");
static_assert(WMQ > 0, "no warp grid for dQ: BM and D leave no tile of 16 rows by DQ_COLS columns per warp");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");

// sm_90 adds vector reductions: four floats per red instruction.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool VEC_RED = true;
#else
constexpr bool VEC_RED = false;
#endif

// Two 8×8 matrices of 16-bit elements, transposed: the addresses of lanes 0–15 (rows 0–7 of the
// first, then of the second), as ldmatrix_x4_trans's first half (ft_sm80.cuh).
__device__ __forceinline__ void ldmatrix_x2_trans(u32 addr, u32 &r0, u32 &r1)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}

// ---- the workspace -----------------------------------------------------------------------------
struct Workspace {
    float *dq;   // [b][hq][mbq] tiles of BM·D floats, in dq_index order
    float *lse2; // [b][hq][mbq·BM]
    float *dsum; // [b][hq][mbq·BM]
    float *dk;   // [b][hkv][nbk·BN][D], with kv_accum only (dv follows it directly)
    float *dv;
    int *dq_sem; // [b][hq][mbq], det only
    int *kv_sem; // [b][hkv][nbk], det with kv_accum only
    int mbq, nbk;
    bool kv_accum;
};

__device__ __forceinline__ Workspace workspace(const BwdParams &p)
{
    Workspace w;
    w.mbq = (p.seqlen_q + BM - 1) / BM;
    w.nbk = (p.seqlen_k + BN - 1) / BN;
    w.kv_accum = GQA_ATOMIC && p.heads_q > p.heads_kv;
    const long long bhq = (long long)p.batch * p.heads_q;
    const long long bhkv = (long long)p.batch * p.heads_kv;
    const long long sqp = (long long)w.mbq * BM;
    const long long skp = (long long)w.nbk * BN;
    float *f = p.ws;
    w.dq = f;
    f += bhq * sqp * D;
    w.lse2 = f;
    f += bhq * sqp;
    w.dsum = f;
    f += bhq * sqp;
    w.dk = w.dv = nullptr;
    if (w.kv_accum) {
        w.dk = f;
        f += bhkv * skp * D;
        w.dv = f;
        f += bhkv * skp * D;
    }
    int *s = (int *)f;
    w.dq_sem = w.kv_sem = nullptr;
    if (DET) {
        w.dq_sem = s;
        s += bhq * w.mbq;
        if (w.kv_accum)
            w.kv_sem = s;
    }
    return w;
}

// Where element e of dQ fragment f of (warp, lane) lies in its BM×D accumulator tile. Fragment
// f = mq·NTD + nd of warp w covers rows (w % WMQ)·TMQ + 16·mq + {g, g+8} and columns
// (w / WMQ)·TDQ + 8·nd + 2t + {0, 1}, element e at row + 8·(e>>1), column + (e&1) (the mma C
// layout, g = lane/4, t = lane%4). With vector reductions a lane's four elements are adjacent
// (one 16-byte red, 512 contiguous bytes per warp); without, element e of the 32 lanes is
// adjacent (each scalar red instruction of a warp covers 128 contiguous bytes).
__device__ __forceinline__ int dq_index(int warp, int f, int lane, int e)
{
    return VEC_RED ? ((warp * FR + f) * 32 + lane) * 4 + e : ((warp * FR + f) * 4 + e) * 32 + lane;
}

// ---- global → shared tile copies ---------------------------------------------------------------
// ROWS rows of D elements from src (row stride in elements) into a tile at dst; rows at or
// beyond `valid`, and the chunks past the head dim, are zero-filled (cp.async with a source size
// of 0).
template <int ROWS>
__device__ __forceinline__ void load_rows(u32 dst, const u16 *src, long long row_stride, int valid)
{
    constexpr int CHUNKS = ROWS * NC;
    constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
    if (THREADS % NC == 0) {
        // Each thread keeps one column chunk and steps down the rows with one pointer.
        constexpr int ROW_STEP = THREADS % NC == 0 ? THREADS / NC : 1;
        int row = (int)threadIdx.x / NC;
        const int chunk = (int)threadIdx.x % NC;
        const bool real = chunk < NCG;
        const u16 *gp = src + row * row_stride + chunk * 8;
        u32 sp = dst + row * PITCH + chunk * 16;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            if (CHUNKS % THREADS == 0 || it * THREADS + (int)threadIdx.x < CHUNKS) {
                const bool ok = real && row < valid;
                cp_async16(sp, ok ? gp : src, ok ? 16 : 0);
            }
            row += ROW_STEP;
            gp += ROW_STEP * row_stride;
            sp += ROW_STEP * PITCH;
        }
    } else {
        // Head dims whose chunk count is not a power of two, so does not divide the thread count
        // (48, 80, 96, 112, 144, ...).
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int idx = it * THREADS + (int)threadIdx.x;
            if (CHUNKS % THREADS == 0 || idx < CHUNKS) {
                const int row = idx / NC, chunk = idx % NC;
                const bool ok = chunk < NCG && row < valid;
                cp_async16(dst + row * PITCH + chunk * 16, ok ? src + row * row_stride + chunk * 8 : src,
                           ok ? 16 : 0);
            }
        }
    }
}

// ---- the products --------------------------------------------------------------------------------
// acc (KEYS_W × BMS, keys as M, queries as N) = A·Bᵀ, with A the warp's key rows key0.. of the
// K or V tile and B the query rows q0.. of one stage's Q or dO tile, k = D.
//   A: ldmatrix.x4 of a 16×16 slab, lane L at row L%16, column 8·(L/16): the registers in A order.
//   B: the tile is [query][d], i.e. Bᵀ row-major: lane L at query 8·(L/16) + L%8, column
//      8·((L/8)%2); registers {0,1} are the B fragment of queries 0–7, {2,3} of queries 8–15.
// acc[mk][nt][e] is key key0 + 16·mk + g + 8·(e>>1), query q0 + 8·nt + 2t + (e&1).
template <int NT>
__device__ __forceinline__ void gemm_keys_queries(u32 a_tile, u32 b_tile, int lane, int key0, int q0,
                                                  float (&acc)[MK][NT][4])
{
#pragma unroll
    for (int mk = 0; mk < MK; ++mk)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[mk][nt][e] = 0.f;
    const u32 a_lane = a_tile + (key0 + (lane & 15)) * PITCH + (lane >> 4) * 16;
    const u32 b_lane = b_tile + (q0 + ((lane >> 4) << 3) + (lane & 7)) * PITCH + ((lane >> 3) & 1) * 16;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
        u32 a[MK][4];
#pragma unroll
        for (int mk = 0; mk < MK; ++mk)
            ldmatrix_x4(a_lane + mk * 16 * PITCH + kk * 32, a[mk][0], a[mk][1], a[mk][2], a[mk][3]);
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            u32 b[4];
            ldmatrix_x4(b_lane + np * 16 * PITCH + kk * 32, b[0], b[1], b[2], b[3]);
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) {
                mma16816(acc[mk][2 * np], a[mk], b[0], b[1]);
                mma16816(acc[mk][2 * np + 1], a[mk], b[2], b[3]);
            }
        }
    }
}

// acc (KEYS_W × DS) += A·B with A the warp's 16-bit Pᵀ or dSᵀ of KB k-blocks of 16 queries in
// registers (a[mk][kb] is the A fragment of keys 16·mk.., queries q_first + 16·kb..: exactly the
// accumulator tiles 2kb and 2kb+1 of those queries packed) and B those query rows of one stage's
// Q or dO tile, [query][d] = k × n row-major, read with ldmatrix.trans: lane L at query
// q_first + 16·kb + L%16, column 8·(2·dp + L/16); registers {0,1} are the B fragment of columns
// 16·dp.., {2,3} of 16·dp + 8... SPLIT = 1 only: all D columns, an even number of n8 tiles.
template <int KB>
__device__ __forceinline__ void gemm_kv_regs(const u32 (&a)[MK][KB][4], u32 b_tile, int lane, int q_first,
                                             float (&acc)[MK][NTK][4])
{
    const u32 b_lane = b_tile + (q_first + (lane & 15)) * PITCH + (lane >> 4) * 16;
#pragma unroll
    for (int kb = 0; kb < KB; ++kb)
#pragma unroll
        for (int dp = 0; dp < NTK / 2; ++dp) {
            u32 b[4];
            ldmatrix_x4_trans(b_lane + kb * 16 * PITCH + dp * 32, b[0], b[1], b[2], b[3]);
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) {
                mma16816(acc[mk][2 * dp], a[mk][kb], b[0], b[1]);
                mma16816(acc[mk][2 * dp + 1], a[mk][kb], b[2], b[3]);
            }
        }
}

// The same with A from a [key][query] tile in shared memory (SPLIT = 2: the other part's
// queries come from there too): A rows key0 + 16·mk + L%16, column 8·(2·kb + L/16), no .trans;
// B columns d0.. of the Q or dO tile. An odd NTK (DS = 72, 88, ...: head dims that are odd
// multiples of 16) leaves a last n8 tile, loaded with ldmatrix.x2.trans from lanes 0–15's
// addresses, which are those of the .x4 loads' registers {0,1}.
__device__ __forceinline__ void gemm_kv_smem(u32 a_tile, u32 b_tile, int lane, int key0, int d0,
                                             float (&acc)[MK][NTK][4])
{
    const u32 a_lane = a_tile + (key0 + (lane & 15)) * SPITCH + (lane >> 4) * 16;
    const u32 b_lane = b_tile + (lane & 15) * PITCH + (d0 / 8 + (lane >> 4)) * 16;
#pragma unroll
    for (int kb = 0; kb < BM / 16; ++kb) {
        u32 a[MK][4];
#pragma unroll
        for (int mk = 0; mk < MK; ++mk)
            ldmatrix_x4(a_lane + mk * 16 * SPITCH + kb * 32, a[mk][0], a[mk][1], a[mk][2], a[mk][3]);
#pragma unroll
        for (int dp = 0; dp < NTK / 2; ++dp) {
            u32 b[4];
            ldmatrix_x4_trans(b_lane + kb * 16 * PITCH + dp * 32, b[0], b[1], b[2], b[3]);
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) {
                mma16816(acc[mk][2 * dp], a[mk], b[0], b[1]);
                mma16816(acc[mk][2 * dp + 1], a[mk], b[2], b[3]);
            }
        }
        if constexpr (NTK % 2 == 1) {
            u32 b0, b1;
            ldmatrix_x2_trans(b_lane + kb * 16 * PITCH + (NTK / 2) * 32, b0, b1);
#pragma unroll
            for (int mk = 0; mk < MK; ++mk)
                mma16816(acc[mk][NTK - 1], a[mk], b0, b1);
        }
    }
}

// acc (TMQ × TDQ at rows m0.., columns d0..) = dS·K with k = the BN keys.
//   A = dS (queries × keys) lives as dSᵀ [key][query], i.e. k × m row-major: ldmatrix.trans,
//   whose lane L then receives elements (k = 2t, 2t+1; m = g) of each 8×8 matrix — the A
//   layout. Matrix i = L/8 (registers a0..a3 = rows 0–7/8–15 × k 0–7, then × k 8–15) is read
//   at key 16·kb + 8·(i/2) + L%8, query m0 + 16·mq + 8·(i%2).
//   B = K [key][d] = k × n row-major: ldmatrix.trans as in gemm_kv_regs.
// acc[mq][nd][e] is query m0 + 16·mq + g + 8·(e>>1), column d0 + 8·nd + 2t + (e&1). An odd NTD
// (DQ_COLS = 8) leaves a last n8 tile, loaded with ldmatrix.x2.trans as in gemm_kv_smem.
__device__ __forceinline__ void gemm_dq(u32 ds_tile, u32 k_tile, int lane, int m0, int d0, float (&acc)[MTQ][NTD][4])
{
#pragma unroll
    for (int mq = 0; mq < MTQ; ++mq)
#pragma unroll
        for (int nd = 0; nd < NTD; ++nd)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[mq][nd][e] = 0.f;
    const int i = lane >> 3;
    const u32 a_lane = ds_tile + ((lane & 7) + 8 * (i >> 1)) * SPITCH + (m0 + 8 * (i & 1)) * 2;
    const u32 b_lane = k_tile + (lane & 15) * PITCH + (d0 / 8 + (lane >> 4)) * 16;
#pragma unroll
    for (int kb = 0; kb < BN / 16; ++kb) {
        u32 a[MTQ][4];
#pragma unroll
        for (int mq = 0; mq < MTQ; ++mq)
            ldmatrix_x4_trans(a_lane + kb * 16 * SPITCH + mq * 32, a[mq][0], a[mq][1], a[mq][2], a[mq][3]);
#pragma unroll
        for (int np = 0; np < NTD / 2; ++np) {
            u32 b[4];
            ldmatrix_x4_trans(b_lane + kb * 16 * PITCH + np * 32, b[0], b[1], b[2], b[3]);
#pragma unroll
            for (int mq = 0; mq < MTQ; ++mq) {
                mma16816(acc[mq][2 * np], a[mq], b[0], b[1]);
                mma16816(acc[mq][2 * np + 1], a[mq], b[2], b[3]);
            }
        }
        if constexpr (NTD % 2 == 1) {
            u32 b0, b1;
            ldmatrix_x2_trans(b_lane + kb * 16 * PITCH + (NTD / 2) * 32, b0, b1);
#pragma unroll
            for (int mq = 0; mq < MTQ; ++mq)
                mma16816(acc[mq][NTD - 1], a[mq], b0, b1);
        }
    }
}

// ---- the main kernel -------------------------------------------------------------------------------
__device__ __forceinline__ void bwd_main(const BwdParams &p)
{
    extern __shared__ __align__(128) unsigned char smem[];

    // Causal: key block 0 has the longest walk and starts first, except in deterministic mode
    // (see the header comment).
    const int n_block = DET && CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int hb = (int)blockIdx.y; // K/V head (gqa=loop) or query head (gqa=atomic)
    const int batch = (int)blockIdx.z;
    const int tid = (int)threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int kg = warp % WN, part = warp / WN;
    const int key0 = kg * KEYS_W; // the warp's first key in the block
    const int q0 = part * BMS;    // its first query row of S and dP in a query block
    const int d0 = part * DS;     // its first column of dK and dV
    const int qm = warp % WMQ, qd = warp / WMQ;

    const int group = p.heads_q / p.heads_kv;
    const int kv_head = GQA_ATOMIC ? hb / group : hb;
    const int h_first = GQA_ATOMIC ? hb : hb * group;
    const int n_heads = GQA_ATOMIC ? 1 : group;
    const Workspace ws = workspace(p);
    const int diag = p.seqlen_k - p.seqlen_q;
    const int n0 = n_block * BN;
    // Causal: row i sees key n0 iff i >= n0 - diag, so earlier query blocks see none of the
    // block's keys. The last row sees every key, so at least one query block remains.
    int m_begin = 0;
    if (CAUSAL && n0 - diag > 0)
        m_begin = (n0 - diag) / BM;
    const int n_m = ws.mbq - m_begin;
    const int n_iter = n_m > 0 ? n_m * n_heads : 0;

    const u32 sbase = smem_addr(smem);
    const u32 sK = sbase + OFF_K, sV = sbase + OFF_V, sQ = sbase + OFF_Q, sDO = sbase + OFF_DO;
    const u32 sDS = sbase + OFF_DS, sP = sbase + OFF_P, sLSE = sbase + OFF_LSE, sDSUM = sbase + OFF_DSUM;

    // Q, dO, LSE·log2(e) and D of query block `qblock` of head `qhead` into buffer `stage`.
    auto issue = [&](int qhead, int qblock, int stage) {
        const int m_first = qblock * BM;
        const u16 *q = (const u16 *)p.q + batch * p.q_batch_stride + qhead * p.q_head_stride +
                       m_first * p.q_row_stride;
        const u16 *dout = (const u16 *)p.dout + batch * p.dout_batch_stride + qhead * p.dout_head_stride +
                          m_first * p.dout_row_stride;
        load_rows<BM>(sQ + stage * Q_TILE, q, p.q_row_stride, p.seqlen_q - m_first);
        load_rows<BM>(sDO + stage * Q_TILE, dout, p.dout_row_stride, p.seqlen_q - m_first);
        const long long row = ((long long)batch * p.heads_q + qhead) * (ws.mbq * BM) + m_first;
        if (tid < BM / 4)
            cp_async16(sLSE + stage * BM * 4 + tid * 16, ws.lse2 + row + tid * 4, 16);
        else if (tid < BM / 2)
            cp_async16(sDSUM + stage * BM * 4 + (tid - BM / 4) * 16, ws.dsum + row + (tid - BM / 4) * 4, 16);
    };
    // The walk: query blocks m_begin .. mbq-1 of head h_first, then of the next head (gqa=loop).
    const int h_end = h_first + n_heads;
    auto advance = [&](int &qhead, int &qblock) {
        if (++qblock == ws.mbq) {
            qblock = m_begin;
            ++qhead;
        }
    };

    const u16 *kp = (const u16 *)p.k + batch * p.k_batch_stride + kv_head * p.k_head_stride + n0 * p.k_row_stride;
    const u16 *vp = (const u16 *)p.v + batch * p.v_batch_stride + kv_head * p.v_head_stride + n0 * p.v_row_stride;
    load_rows<BN>(sK, kp, p.k_row_stride, p.seqlen_k - n0);
    load_rows<BN>(sV, vp, p.v_row_stride, p.seqlen_k - n0);
    int head = h_first, m = m_begin;  // this iteration's query block
    int next_head = head, next_m = m; // the next one to load
    if (n_iter > 0)
        issue(next_head, next_m, 0);
    advance(next_head, next_m);
    cp_async_commit();

    // dk[mk][nt][e], dv[mk][nt][e]: key key0 + 16·mk + g + 8·(e>>1), column d0 + 8·nt + 2t + (e&1).
    float dk[MK][NTK][4], dv[MK][NTK][4];
#pragma unroll
    for (int mk = 0; mk < MK; ++mk)
#pragma unroll
        for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                dk[mk][nt][e] = dv[mk][nt][e] = 0.f;

#pragma unroll 1
    for (int it = 0; it < n_iter; ++it) {
        const int m_first = m * BM;
        const int stage = STAGES == 1 ? 0 : (it & 1);
        const u32 sq_s = sQ + stage * Q_TILE, sdo_s = sDO + stage * Q_TILE;

        cp_async_wait<0>(); // this iteration's tiles have landed (this thread's copies) ...
        __syncthreads();     // ... everyone's; and everyone is done with the previous iteration
        if (STAGES == 2) {
            if (next_head < h_end)
                issue(next_head, next_m, stage ^ 1);
            advance(next_head, next_m);
            cp_async_commit();
        }

        // dPᵀ whole, then Sᵀ in chunks of SCH n8 tiles (8·SCH queries), each chunk turned into P
        // and dS, stored, and (SPLIT = 1) taken into dV and dK at once: fewer accumulators and
        // fragments live at a time than with all of Sᵀ beside dPᵀ.
        float dp[MK][NTQ][4];
        gemm_keys_queries(sV, sdo_s, lane, key0, q0, dp);
        const bool mask = n0 + BN > p.seqlen_k || m_first + BM > p.seqlen_q ||
                          (CAUSAL && n0 + BN - 1 > m_first + diag);
        const float *lse_s = (const float *)(smem + OFF_LSE + stage * BM * 4);
        const float *dsum_s = (const float *)(smem + OFF_DSUM + stage * BM * 4);
#pragma unroll
        for (int c = 0; c < NTQ / SCH; ++c) {
            const int qc = q0 + c * SCH * 8; // the chunk's first query in the block
            float s[MK][SCH][4];
            gemm_keys_queries(sK, sq_s, lane, key0, qc, s);
            // P = exp2(s·scale·log2(e) − LSE·log2(e)), 0 where masked; dS = P·(dP − D).
#pragma unroll
            for (int j = 0; j < SCH; ++j) {
                const int ql = qc + j * 8 + 2 * t;
                const float2 l2 = *(const float2 *)(lse_s + ql);
                const float2 dd = *(const float2 *)(dsum_s + ql);
#pragma unroll
                for (int mk = 0; mk < MK; ++mk)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int key = n0 + key0 + mk * 16 + g + 8 * (e >> 1);
                        const int query = m_first + ql + (e & 1);
                        float pr = ex2(fmaf(s[mk][j][e], p.scale_log2, -((e & 1) ? l2.y : l2.x)));
                        if (mask && (key >= p.seqlen_k || query >= p.seqlen_q || (CAUSAL && key > query + diag)))
                            pr = 0.f;
                        s[mk][j][e] = pr;
                        dp[mk][c * SCH + j][e] = pr * (dp[mk][c * SCH + j][e] - ((e & 1) ? dd.y : dd.x));
                    }
            }
            // 16-bit Pᵀ and dSᵀ of the chunk as A fragments: k-block kb = tiles 2kb, 2kb+1.
            u32 pf[MK][SCH / 2][4], dsf[MK][SCH / 2][4];
#pragma unroll
            for (int mk = 0; mk < MK; ++mk)
#pragma unroll
                for (int kb = 0; kb < SCH / 2; ++kb) {
                    const float(&d0t)[4] = dp[mk][c * SCH + 2 * kb];
                    const float(&d1t)[4] = dp[mk][c * SCH + 2 * kb + 1];
                    pf[mk][kb][0] = pack2(s[mk][2 * kb][0], s[mk][2 * kb][1]);
                    pf[mk][kb][1] = pack2(s[mk][2 * kb][2], s[mk][2 * kb][3]);
                    pf[mk][kb][2] = pack2(s[mk][2 * kb + 1][0], s[mk][2 * kb + 1][1]);
                    pf[mk][kb][3] = pack2(s[mk][2 * kb + 1][2], s[mk][2 * kb + 1][3]);
                    dsf[mk][kb][0] = pack2(d0t[0], d0t[1]);
                    dsf[mk][kb][1] = pack2(d0t[2], d0t[3]);
                    dsf[mk][kb][2] = pack2(d1t[0], d1t[1]);
                    dsf[mk][kb][3] = pack2(d1t[2], d1t[3]);
                }
            // dSᵀ (and with SPLIT = 2 Pᵀ) to shared memory, [key][query]: register r of k-block
            // kb holds key +8·(r&1), queries 16·kb + 8·(r>>1) + 2t, +1 (from the chunk's first).
#pragma unroll
            for (int mk = 0; mk < MK; ++mk)
#pragma unroll
                for (int kb = 0; kb < SCH / 2; ++kb)
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int off = (key0 + mk * 16 + g + 8 * (r & 1)) * SPITCH +
                                        (qc + kb * 16 + 8 * (r >> 1) + 2 * t) * 2;
                        *(u32 *)(smem + OFF_DS + off) = dsf[mk][kb][r];
                        if (SPLIT > 1)
                            *(u32 *)(smem + OFF_P + off) = pf[mk][kb][r];
                    }
            if constexpr (SPLIT == 1) {
                gemm_kv_regs(pf, sdo_s, lane, qc, dv);
                gemm_kv_regs(dsf, sq_s, lane, qc, dk);
            }
        }
        __syncthreads(); // dSᵀ (and Pᵀ) complete; with SPLIT = 1 also every read of Q and dO done
        if constexpr (SPLIT == 2) {
            gemm_kv_smem(sP, sdo_s, lane, key0, d0, dv);
            gemm_kv_smem(sDS, sq_s, lane, key0, d0, dk);
            if (STAGES == 1)
                __syncthreads(); // every read of Q and dO done
        }
        if (STAGES == 1) {
            if (next_head < h_end)
                issue(next_head, next_m, 0);
            advance(next_head, next_m);
            cp_async_commit();
        }

        float acc[MTQ][NTD][4];
        gemm_dq(sDS, sK, lane, qm * TMQ, qd * TDQ, acc);
        float *dst = ws.dq + (((long long)batch * p.heads_q + head) * ws.mbq + m) * (BM * D);
        int *sem = DET ? ws.dq_sem + ((long long)batch * p.heads_q + head) * ws.mbq + m : nullptr;
        if (DET) {
            // This CTA's place in the tile's order: n_block, or with causal masking the count
            // of key blocks after it that touch query block m (keys < key_end: the last row's).
            int place = n_block;
            if (CAUSAL) {
                const int key_end = min(p.seqlen_k, m_first + BM + diag);
                place = (key_end + BN - 1) / BN - 1 - n_block;
            }
            sem_wait(sem, place);
        }
#pragma unroll
        for (int mq = 0; mq < MTQ; ++mq)
#pragma unroll
            for (int nd = 0; nd < NTD; ++nd) {
                const int f = mq * NTD + nd;
                if (VEC_RED) {
                    red_add4(dst + dq_index(warp, f, lane, 0), acc[mq][nd][0], acc[mq][nd][1], acc[mq][nd][2],
                             acc[mq][nd][3]);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        red_add(dst + dq_index(warp, f, lane, e), acc[mq][nd][e]);
                }
            }
        if (DET)
            sem_release(sem);
        advance(head, m);
    }

    // dK = scale · dSᵀ·Q; dV as it is.
    cp_async_wait<0>();
    __syncthreads(); // every read of K and V done
    const int key_valid = min(BN, p.seqlen_k - n0);
#pragma unroll
    for (int mk = 0; mk < MK; ++mk)
#pragma unroll
        for (int nt = 0; nt < NTK; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                dk[mk][nt][e] *= p.scale;
    if (ws.kv_accum) {
        // Summed over the group's query heads in fp32; the post kernel converts.
        int *sem = DET ? ws.kv_sem + ((long long)batch * p.heads_kv + kv_head) * ws.nbk + n_block : nullptr;
        if (DET)
            sem_wait(sem, hb % group);
        const long long base = (((long long)batch * p.heads_kv + kv_head) * ws.nbk * BN + n0) * D;
#pragma unroll
        for (int mk = 0; mk < MK; ++mk)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = key0 + mk * 16 + g + 8 * h;
                if (row >= key_valid)
                    continue;
#pragma unroll
                for (int nt = 0; nt < NTK; ++nt) {
                    const int col = d0 + nt * 8 + 2 * t;
                    red_add2(ws.dk + base + row * D + col, dk[mk][nt][2 * h], dk[mk][nt][2 * h + 1]);
                    red_add2(ws.dv + base + row * D + col, dv[mk][nt][2 * h], dv[mk][nt][2 * h + 1]);
                }
            }
        if (DET)
            sem_release(sem);
    } else {
        // Staged in the K and V tiles for 16-byte stores.
#pragma unroll
        for (int mk = 0; mk < MK; ++mk)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int nt = 0; nt < NTK; ++nt) {
                    const int off = (key0 + mk * 16 + g + 8 * h) * PITCH + (d0 + nt * 8 + 2 * t) * 2;
                    *(u32 *)(smem + OFF_K + off) = pack2(dk[mk][nt][2 * h], dk[mk][nt][2 * h + 1]);
                    *(u32 *)(smem + OFF_V + off) = pack2(dv[mk][nt][2 * h], dv[mk][nt][2 * h + 1]);
                }
        __syncthreads();
        u16 *dkp = (u16 *)p.dk + batch * p.dk_batch_stride + kv_head * p.dk_head_stride + n0 * p.dk_row_stride;
        u16 *dvp = (u16 *)p.dv + batch * p.dv_batch_stride + kv_head * p.dv_head_stride + n0 * p.dv_row_stride;
        for (int idx = tid; idx < key_valid * NCG; idx += THREADS) {
            const int row = idx / NCG, chunk = idx % NCG;
            const int off = row * PITCH + chunk * 16;
            *(uint4 *)(dkp + row * p.dk_row_stride + chunk * 8) = *(const uint4 *)(smem + OFF_K + off);
            *(uint4 *)(dvp + row * p.dv_row_stride + chunk * 8) = *(const uint4 *)(smem + OFF_V + off);
        }
    }
}

// ---- the preprocessing kernel ---------------------------------------------------------------------
// D and LSE·log2(e) of query block blockIdx.x (bwd_row_stats, ft_bwd_pre.cuh; unpack2 is there
// too); then the block's dQ accumulator tile zeroed (DET: and its counter), and with kv_accum a
// share of the dK and dV accumulators.
__device__ __forceinline__ void bwd_pre(const BwdParams &p)
{
    const int m = (int)blockIdx.x, head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const int tid = (int)threadIdx.x;
    const Workspace ws = workspace(p);
    const long long bh = (long long)batch * p.heads_q + head;
    bwd_row_stats<BM, NCG, THREADS>(p, m, head, batch, bh * (ws.mbq * BM) + m * BM, ws.dsum, ws.lse2);

    float4 *dq = (float4 *)(ws.dq + (bh * ws.mbq + m) * (BM * D));
    for (int i = tid; i < BM * D / 4; i += THREADS)
        dq[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (DET && tid == 0)
        ws.dq_sem[bh * ws.mbq + m] = 0;
    if (ws.kv_accum) {
        // The dK and dV accumulators (adjacent; bwd_zero_kv_sums, ft_bwd_pre.cuh) and their
        // semaphores, shared out over all blocks.
        bwd_zero_kv_sums<THREADS>(ws.dk, (long long)p.batch * p.heads_kv * ws.nbk * BN * D * 2 / 4);
        if (DET) {
            long long begin, end;
            bwd_block_share((long long)p.batch * p.heads_kv * ws.nbk, begin, end);
            for (long long i = begin + tid; i < end; i += THREADS)
                ws.kv_sem[i] = 0;
        }
    }
}

// ---- the postprocessing kernel --------------------------------------------------------------------
__device__ __forceinline__ void bwd_post(const BwdParams &p)
{
    const int x = (int)blockIdx.x, head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const int tid = (int)threadIdx.x;
    const Workspace ws = workspace(p);

    if (x < ws.mbq) {
        // One thread per (fragment, lane): rows row and row + 8, columns col and col + 1.
        const float *src = ws.dq + (((long long)batch * p.heads_q + head) * ws.mbq + x) * (BM * D);
        u16 *dq = (u16 *)p.dq + batch * p.dq_batch_stride + head * p.dq_head_stride;
        for (int i = tid; i < WARPS * FR * 32; i += THREADS) {
            const int w = (i >> 5) / FR, f = (i >> 5) % FR, lane = i & 31;
            const int row = x * BM + (w % WMQ) * TMQ + (f / NTD) * 16 + (lane >> 2);
            const int col = (w / WMQ) * TDQ + (f % NTD) * 8 + 2 * (lane & 3);
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e)
                v[e] = src[dq_index(w, f, lane, e)] * p.scale;
            const bool real = D == DH || col < DH; // not a column past the head dim
            if (row < p.seqlen_q && real)
                *(u32 *)(dq + row * p.dq_row_stride + col) = pack2(v[0], v[1]);
            if (row + 8 < p.seqlen_q && real)
                *(u32 *)(dq + (row + 8) * p.dq_row_stride + col) = pack2(v[2], v[3]);
        }
    }
    if (ws.kv_accum && head < p.heads_kv && x < ws.nbk) {
        const int n0 = x * BN;
        const int valid = min(BN, p.seqlen_k - n0);
        const long long base = (((long long)batch * p.heads_kv + head) * ws.nbk * BN + n0) * D;
        u16 *dk = (u16 *)p.dk + batch * p.dk_batch_stride + head * p.dk_head_stride + n0 * p.dk_row_stride;
        u16 *dv = (u16 *)p.dv + batch * p.dv_batch_stride + head * p.dv_head_stride + n0 * p.dv_row_stride;
        bwd_store_kv_sums<D, NCG, THREADS>(p, ws.dk + base, ws.dv + base, dk, dv, valid);
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
