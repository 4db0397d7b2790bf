// flash_bwd_sm90 — FlashAttention backward kernels on wgmma for compute capability 9.0 (sm_90a).
//
// The same operation and conventions as flash_bwd_sm80 (dQ, dK, dV by recomputing P from Q, K
// and the forward's LSE; bottom-right causal alignment; grouped-query heads; a row that sees no
// key contributes nothing), with the five matrix products on warpgroup MMAs:
//   Sᵀ  = K·Qᵀ    dPᵀ = V·dOᵀ      m64 (keys) × SQ (queries) × D, both operands in shared memory
//   dV += Pᵀ·dO   dK += dSᵀ·Q      m64 (keys) × DKV × BM, Pᵀ and dSᵀ from registers (the
//                                  accumulators of Sᵀ and dPᵀ are already the A operands) or,
//                                  KVSPLIT, from shared memory
//   dQ  = dS·K                     m64 (queries) × 64 × BN per pass, dSᵀ through shared memory
//                                  (read transposed: MN-major A), K read MN-major; split among
//                                  the consumers by columns (BM = 64) or by rows (BM = 128)
//   or, DQT (BM not a multiple of 64: 80),
//       dQᵀ = Kᵀ·dSᵀ               m64 (columns of dQ) × BM × BN per pass, K read MN-major, dS
//                                  through shared memory (stored transposed, read K-major); the
//                                  consumers split the columns, 64 a pass
// Each consumer warpgroup owns 64 keys (SQ = BM, DKV = D) or, KVSPLIT, the two share the
// block's 64 keys: warpgroup w computes Sᵀ and dPᵀ for queries SQ·w.. (SQ = BM/2), writes its
// Pᵀ and dSᵀ to shared memory, and after a barrier dV and dK for columns DKV·w.. (DKV = D/2) from
// both warpgroups' halves; that halves the dK and dV registers (what makes D = 256 fit).
// P and dS are rounded to the element type before the products that take them; accumulation is
// fp32 throughout.
//
// ---- the three kernels, in stream order: pre → main → post ----------------------------------
// FT_DEFINE_KERNEL(name) defines name##_pre, name and name##_post, extern "C", each taking one
// BwdParams by value (the main kernel also the tensor maps of Q, dO, K and V), all with
// THREADS = 128·(NWG + 1) threads (NWG consumer warpgroups: BN/64, or two with KVSPLIT; and a
// producer warpgroup).
// With MBQ = ceil(seqlen_q / BM) and NBK = ceil(seqlen_k / BN):
//   name##_pre   grid (MBQ, heads_q, batch): D = rowsum(dO ∘ O) and LSE·log2(e) of the query
//                block into the workspace (padding rows: 0 and +inf, so that their P is 0),
//                and its dQ accumulator tile (DET: and its counter) zeroed. The host zeroes
//                nothing.
//   name         grid (NBK, heads_kv, batch), FT_SMEM_BYTES of dynamic shared memory (LPT: the
//                grid's linear index names the key block, slowest, then head and batch). One CTA
//                per key block of one K/V head walks every query head of the K/V group and, in
//                each, the query blocks that see the block (causal: from the first row that sees
//                its first key); DET with causal masking, key block NBK-1-blockIdx.x (the
//                shortest walks first: the order of each dQ tile's additions). Warpgroup 0
//                produces, warpgroups 1..NWG consume:
//                  one thread of the producer loads K and V once, then each block's Q, dO,
//                  LSE·log2(e) and D into one of two stages (TMA tensor copies and bulk copies
//                  completing the stage's "full" mbarrier; it refills a stage once the
//                  consumers' "empty" mbarrier says they are done);
//                  warp 1 of the producer adds each block's dQ partial, staged in shared memory
//                  by the consumers, into the workspace with one bulk reduction per consumer
//                  warpgroup's share (cp.reduce.async.bulk .add.f32), a pair of named barriers
//                  per warpgroup handing its part of the staging buffer back and forth (DET:
//                  a block's first reduction waits for the tile's counter to reach this key
//                  block's place, and its last counts on once complete);
//                  each consumer warpgroup owns 64 keys (or half of the queries and columns of
//                  64 shared ones, KVSPLIT): Sᵀ, dPᵀ, Pᵀ, dSᵀ, its keys' dK and dV (in
//                  registers for the whole kernel, written at the end through the K and V
//                  tiles, dK scaled) and its share of the block's dQ partial (ROWSPLIT);
//                  DQ_RED: the consumers add their shares to the workspace themselves
//                  (red.global.add.v4.f32) and producer warp 1 idles.
//   name##_post  grid (MBQ, heads_q, batch): dQ accumulator tile → dQ · scale, element type.
//
// ---- the workspace (BwdParams::ws, 16-byte aligned; 256 recommended) --------------------------
// With SQP = MBQ·BM and D the tiles' width (the head dim where it is a multiple of 16; ops/bwd.c
// sizes it alike), in this order:
//   dq_acc  float [batch][heads_q][MBQ][BM·D]   one tile per query block, in the order of the
//                                               consumers' staging buffer (dq_index)
//   lse2    float [batch][heads_q][SQP]         LSE·log2(e); +inf on padding rows
//   dsum    float [batch][heads_q][SQP]         D; 0 on padding rows
//   dq_sem  int   [batch][heads_q][MBQ]         DET only: each dQ tile's count of additions
//
// ---- shared memory ------------------------------------------------------------------------------
// From a 1024-aligned base: K and V [BN][D], two stages of Q and dO [BM][D], two dSᵀ buffers
// [BN][BM] (block i writes buffer i % 2, so one barrier per block keeps a block's dS from
// overwriting the one a slower warpgroup still reads), KVSPLIT two Pᵀ buffers likewise, the dQ
// staging buffer [BM·D] floats (not with DQ_RED), two stages of LSE·log2(e) and D [BM], and
// the mbarriers. The Q, dO, K and V tiles are column blocks of CH (FTP_SPAN) elements, rows of
// CH·2 bytes swizzled as TMA's SWIZZLE_128B (CH = 64), SWIZZLE_64B (32) or SWIZZLE_32B (16)
// writes them: wgmma's canonical layout of that swizzle, read K-major (along D) and MN-major
// (along the rows) alike; the variant's span is the widest that its tiles' width, its warpgroups'
// dK/dV columns and its dQ passes are multiples of (the generator works it out and tells the
// runtime, which encodes the tensor maps' boxes alike). The dSᵀ and Pᵀ tiles [BN][BM] are column
// blocks of 64 queries with the 128-byte swizzle (chunk c of row r at c ^ (r & 7)); DQT's dS
// tile is [BM][BN], column blocks of 64 keys, swizzled alike.
//
// A consumer, per query block: wait for its stage; its LSE·log2(e) (and, unless S_FIRST, D)
// into registers where PRELOAD; Sᵀ and dPᵀ issued (two wgmma groups); once
// Sᵀ is done (EARLY_DV, EXP_UNDER_DP; else once both are), Pᵀ in registers (the masks only on
// blocks that need them) and, EARLY_DV, dV issued; once dPᵀ is done, dSᵀ in registers (and
// EXP_UNDER_DP, Pᵀ packed for dV) and to shared memory (and dV issued if not yet); barrier of
// the consumers; dQ's partial by passes of PW columns, and dK issued with the last;
// each pass, once done, to the staging buffer (the last while dK runs); the stage released once
// every product is done; the staged partial handed to the producer once the next block's Sᵀ and
// dPᵀ are issued (DQ_LATE) or at once. KVSPLIT: Pᵀ and dSᵀ both to shared memory; after the
// barrier dV, dK and every pass of dQ issued at once, each pass added to the workspace once done.
//
// Compile-time parameters, defined by the generated prelude:
//   FTP_D       DH, the head dimension: a multiple of 8 from 32 to 256 (the tiles are D wide: DH
//               rounded up to 16, with KVSPLIT an odd multiple of 8 to 32; see D below)
//   FTP_BM      query rows per block of the loop: 64, or 128 with two consumer warpgroups, or
//               DQT a multiple of 16 that 64 does not divide (80: the products' n is 80)
//   FTP_BN      keys per CTA: 64 per consumer warpgroup (64, 128), or 64 with KVSPLIT
//   FTP_KVSPLIT 1: two consumer warpgroups share the 64 keys (BM = 64, not EARLY_DV)
//   FTP_DQ_RED  1: dQ's partials added from registers, 0: staged and bulk-reduced
//   FTP_GQA_LOOP or FTP_GQA_ATOMIC: grouped-query heads (see GQA_ATOMIC below)
//   FTP_DET     1: the bulk reductions into each dQ tile in a fixed order of key blocks (not
//               with DQ_RED or LPT): the same bits on every run
//   FTP_CAUSAL  0 or 1      FTP_DTYPE_F16 or FTP_DTYPE_BF16      FT_SMEM_BYTES
//   FTP_EARLY_DV 1: dV's product issued while dPᵀ's runs (more registers live), 0: after it;
//               2: Pᵀ's exponentials while dPᵀ's product runs (Pᵀ kept in fp32 until dSᵀ is
//               made, then packed), dV after dSᵀ (the order FlashAttention-3/4 use); 3: as 1,
//               dV's k16 steps each issued as soon as its 16 query columns of Pᵀ are packed
//               (the tensor cores start dV while the rest of the exponentials run)
//   FTP_LPT     1: the grid's linear index walks key blocks slowest (longest causal walks first)
//   FTP_S_AHEAD 1: the next block's Sᵀ issued before this block's dK is waited for (not with
//               KVSPLIT), so that the tensor cores have it while the block's last steps run
//   FTP_DQ_LATE 1: the staged dQ partial handed over after the next block's Sᵀ and dPᵀ are issued
//               (DQ_LATE; not with DQ_RED, S_AHEAD or KVSPLIT)
//   FTP_QROT    1: key block j starts its walk at row block j (modulo the walk's length; QROT, not
//               with CAUSAL or DET)
//   FTP_TILE_D  D, the tiles' width (see D below)
//   FTP_SPAN    CH, elements per swizzled row of a Q, dO, K or V column block (64, 32 or 16)
//   FTP_DQ_WIDTH PW, columns per pass of a warpgroup's dQ partial (a multiple of CH, at most 112)
// and the generated wgmma wrappers ft_wgmma_st (m64n{SQ}k16, both operands K-major in shared
// memory), ft_wgmma_kv (m64n{D}k16, A from registers, B MN-major; KVSPLIT: ft_wgmma_kvs,
// m64n{D/2}k16, A K-major in shared memory) and ft_wgmma_dq (m64n{PW}k16, A and B MN-major in
// shared memory; DQT m64n{BM}k16, A MN-major, B K-major).

#if !defined(FTP_D) || !defined(FTP_BM) || !defined(FTP_BN) || !defined(FTP_CAUSAL) || !defined(FTP_EARLY_DV) || \
    !defined(FTP_LPT) || !defined(FTP_KVSPLIT) || !defined(FTP_DQ_RED) || !defined(FTP_DET) || !defined(FTP_SPAN) ||  \
    !defined(FTP_DQ_WIDTH) || !defined(FTP_TILE_D) || !defined(FTP_S_AHEAD) || !defined(FTP_DQ_LATE) ||              \
    !defined(FTP_QROT) || !defined(FT_SMEM_BYTES)
#error "flash_bwd_sm90 needs FTP_D, FTP_BM, FTP_BN, FTP_CAUSAL, FTP_EARLY_DV, FTP_LPT, FTP_KVSPLIT, FTP_DQ_RED, FTP_DET, FTP_SPAN, FTP_DQ_WIDTH, FTP_TILE_D, FTP_S_AHEAD, FTP_DQ_LATE, FTP_QROT and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_bwd_sm90 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif
#if defined(FTP_GQA_LOOP) == defined(FTP_GQA_ATOMIC)
#error "flash_bwd_sm90 needs exactly one of FTP_GQA_LOOP and FTP_GQA_ATOMIC"
#endif
#ifndef FT_HOLD_BASE // see consume
#define FT_HOLD_BASE 1
#endif

#include "ft_device.cuh"
#include "ft_atomic.cuh"
#include "ft_params_bwd.cuh"
#include "ft_bwd_pre.cuh"
#include "ft_sm90.cuh"

namespace ft {

constexpr int DH = FTP_D; // the head dim: the columns of every tensor in global memory
constexpr int BM = FTP_BM;
constexpr int BN = FTP_BN;
constexpr bool CAUSAL = FTP_CAUSAL != 0;
constexpr bool STREAM_DV = FTP_EARLY_DV == 3; // EARLY_DV with dV's k16 steps issued as Pᵀ's columns are made
constexpr bool EARLY_DV = FTP_EARLY_DV == 1 || STREAM_DV;
constexpr bool EXP_UNDER_DP = FTP_EARLY_DV == 2;
constexpr bool S_FIRST = EARLY_DV || EXP_UNDER_DP; // Pᵀ made before dPᵀ's product is done
constexpr bool LPT = FTP_LPT != 0;
constexpr bool KVSPLIT = FTP_KVSPLIT != 0;
constexpr bool DQ_RED = FTP_DQ_RED != 0;
constexpr bool DET = FTP_DET != 0;
constexpr bool S_AHEAD = FTP_S_AHEAD != 0;
// Grouped-query heads. GQA_LOOP: a CTA owns BN keys of one K/V head and walks the query blocks
// of every query head of its group, so dK and dV are summed in its registers; a causal call then
// has a group's times fewer CTAs, each walking a group's times longer, and the longest walks set
// the end (at 4k, 8 heads a group, d = 128: 0.72 of FA4, 2026-12-07). GQA_ATOMIC: a CTA owns BN
// keys of one query head (the grid's y), as without groups; where the call has groups its dK and
// dV (dK scaled) are added into fp32 sums in the workspace (red.global.add), which the post
// kernel converts. The order of those additions varies: not with DET.
#if defined(FTP_GQA_ATOMIC)
constexpr bool GQA_ATOMIC = true;
#else
constexpr bool GQA_ATOMIC = false;
#endif
static_assert(!GQA_ATOMIC || !DET, "dK and dV summed by atomics have no fixed order of additions");
// The tiles' width D (FTP_TILE_D): the head dim rounded up to whole k16 steps, and with KVSPLIT
// to two halves of whole k16 steps, a multiple of 32 (generator/family.c bwd_sm90_tile_width).
// TMA fills a tile's D − DH columns past the head dim with zeros, so every product over them adds
// zeros and the gradients' columns there are zeros, never stored; the dQ accumulator tiles in
// the workspace are D wide too.
constexpr int D = FTP_TILE_D;

constexpr int NWG = KVSPLIT ? 2 : BN / 64; // consumer warpgroups: 64 keys each, or two sharing 64
constexpr int CT = 128 * NWG;      // consumer threads
constexpr int THREADS = CT + 128;  // and the producer warpgroup (warpgroup 0)
// Each consumer warpgroup hands its share of a block's dQ partial to the producer through its own
// part of the staging buffer, with its own pair of barriers (HAND_THREADS: the warpgroup and
// producer warp 1), so that neither waits for the other's share to be read.
constexpr int HAND_THREADS = 128 + 32;
// dQ's partial of a block is split among the consumers by columns (BM = 64: warpgroup w owns DC
// = D/NWG columns of every row) or, with BM = 128 and two consumers, by rows (warpgroup w owns
// rows 64·w.. of every column).
// DQT (BM not a multiple of 64, which no wgmma's m can be): dQ is computed transposed, the
// columns as m, 64 a pass, and the block's BM queries as n.
constexpr bool ROWSPLIT = BM == 128;
constexpr bool DQT = BM % 64 != 0;
constexpr int DC = ROWSPLIT ? D : D / NWG; // dQ columns per consumer warpgroup
// DQ_LATE: a block's staged dQ partial is handed to the producer (the async-proxy fence, which
// waits for the staging stores, and the arrival) after the next block's Sᵀ and dPᵀ are issued,
// not before dK is waited for: at the loop's turn the fence and the arrival stood between dK's
// completion and the next Sᵀ's issue (9 % of the consumers' stall samples at d = 128 8k on an
// H100, 2026-12-06), the tensor cores idle. Not with S_AHEAD, which issues that Sᵀ before them
// already, nor KVSPLIT, which stages all passes at the end of its own order.
constexpr bool DQ_LATE = FTP_DQ_LATE != 0;
static_assert(!DQ_LATE || (!DQ_RED && !S_AHEAD && !KVSPLIT),
              "the late hand-off is of a staged partial, without S_AHEAD or KVSPLIT");
// QROT: without it every CTA of a head walks the query blocks from the first, in step with the
// others, and so all of them add their dQ partials into the same tile at about the same time
// (the read-modify-writes of one address in L2 wait for each other); with it key block j starts
// at row block j of the walk and goes round, so the CTAs running at once add into different
// tiles. The query tiles they read then differ too (a window of as many tiles as CTAs of the head
// run at once, kept in L2). Non-causal only: causal walks start at the diagonal, apart already;
// DET fixes the order of the additions by the walk.
constexpr bool QROT = FTP_QROT != 0;
static_assert(!QROT || (!CAUSAL && !DET), "the rotated walk is for non-causal, non-deterministic kernels");
constexpr int PW = FTP_DQ_WIDTH;           // dQ columns per pass
constexpr int DQ_PASSES = DC / PW;
constexpr int DQ_ACC = DQT ? BM / 2 : PW / 2; // a pass's accumulators per thread
constexpr int DQ_ALL = DQ_PASSES * DQ_ACC;    // and all of them
constexpr int CH = FTP_SPAN;       // elements per swizzled row of a Q, dO, K or V column block
constexpr int SWB = CH * 2;        // its bytes: the swizzle span (128, 64 or 32)
constexpr int ROW = 128;           // bytes per row of a 64-query block of the dSᵀ and Pᵀ tiles (DQT's dS: 64 keys)
constexpr int CPR = DH / 8;        // 16-byte chunks per row of a tensor in global memory
constexpr int SQ = KVSPLIT ? BM / 2 : BM; // queries of a warpgroup's Sᵀ (and dPᵀ)
constexpr int DKV = KVSPLIT ? D / 2 : D;  // columns of a warpgroup's dK (and dV)
constexpr int SN = SQ / 2;         // Sᵀ (and dPᵀ) accumulators per thread
constexpr int KN = DKV / 2;        // dK (and dV) accumulators per thread

constexpr u32 KV_BYTES = BN * D * 2;
constexpr u32 QT_BYTES = BM * D * 2;
constexpr u32 DS_BYTES = BN * BM * 2;
constexpr u32 OFF_K = 0;
constexpr u32 OFF_V = OFF_K + KV_BYTES;
constexpr u32 OFF_Q = OFF_V + KV_BYTES;        // stage s at OFF_Q + s·QT_BYTES
constexpr u32 OFF_DO = OFF_Q + 2 * QT_BYTES;
constexpr u32 OFF_DS = OFF_DO + 2 * QT_BYTES;  // buffer b at OFF_DS + b·DS_BYTES
constexpr u32 OFF_P = OFF_DS + 2 * DS_BYTES;   // KVSPLIT: Pᵀ buffer b at OFF_P + b·DS_BYTES
constexpr u32 OFF_DQ = OFF_P + (KVSPLIT ? 2 * DS_BYTES : 0); // BM·D floats, not with DQ_RED
constexpr u32 OFF_STAT = OFF_DQ + (DQ_RED ? 0 : BM * D * 4); // stage s: BM floats of LSE·log2(e), then BM of D
constexpr u32 OFF_BAR = OFF_STAT + 2 * 2 * BM * 4;
constexpr u32 BAR_BYTES = 64;                  // five mbarriers, 8 bytes each
constexpr int SMEM_BYTES = 1024 + OFF_BAR + BAR_BYTES;
// At the end dK and dV go out through shared memory from OFF_K on: rows of D elements padded by
// 16 bytes (D/8 + 1 chunks, an odd number: a warp's stores of eight rows hit eight bank groups).
constexpr u32 OUT_PITCH = (D + 8) * 2;

static_assert(DH % 8 == 0 && DH >= 32 && DH <= 256, "head dimension: a multiple of 8 from 32 to 256");
static_assert(D % 16 == 0 && D >= DH && D - DH < 32 && D <= 256, "tiles the head dim rounded up to whole k16 steps");
static_assert(CH == 64 || CH == 32 || CH == 16, "column blocks of 64, 32 or 16 elements");
static_assert(D % CH == 0 && DKV % CH == 0 && PW % CH == 0 && DC == PW * DQ_PASSES && PW <= 112,
              "the head dim, each warpgroup's dK/dV columns and each dQ pass are whole column blocks");
static_assert(2 * BN * OUT_PITCH <= OFF_BAR, "dK and dV leave through the tiles' space");
static_assert(BM == 64 || (BM == 128 && NWG == 2 && !KVSPLIT) || (DQT && BM % 16 == 0 && BM <= 256 && !KVSPLIT),
              "64 query rows per block, 128 with two consumer warpgroups of 64 keys each, or DQT's "
              "whole k16 steps");
static_assert(!DQT || PW == 64, "DQT: dQᵀ by passes of 64 columns (wgmma's m)");
static_assert(BN == 64 || (BN == 128 && !KVSPLIT), "64 keys per consumer warpgroup, one or two warpgroups, or 64 shared");
static_assert(FTP_EARLY_DV >= 0 && FTP_EARLY_DV <= 3, "early_dv is 0, 1, 2 or 3");
static_assert(!STREAM_DV || !S_AHEAD, "early_dv = 3 is not with s_ahead");
static_assert(!KVSPLIT || !EARLY_DV, "with shared keys dV's product waits for both warpgroups' Pᵀ");
static_assert(!KVSPLIT || DQ_PASSES <= 2, "KVSPLIT keeps every pass of dQ in flight at once: at most two");
static_assert(NWG <= 2, "one or two consumer warpgroups");
static_assert(!KVSPLIT || !S_AHEAD, "with shared keys the next block's Sᵀ is not issued ahead");
static_assert(!DET || (!DQ_RED && !LPT), "the fixed order of dQ's additions is kept by producer warp 1, in the launch order");
static_assert(OFF_DS % 1024 == 0 && OFF_P % 1024 == 0 && DS_BYTES % 1024 == 0,
              "Pᵀ and dSᵀ tiles 1024-aligned: store_keys_by_queries swizzles by address bits");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");

// Registers per thread after setmaxnreg, with two consumer warpgroups: the producer gives its
// registers to the consumers (128·24 + 256·240 ≤ 64K). With one, every thread has 255 at launch.
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = 240;

// Named barriers (0 is __syncthreads): the consumers' dSᵀ written; hand-off h's part of the dQ
// staging buffer full (consumers → producer warp 1) and empty again (back).
constexpr int BAR_DS = 1;
__device__ __forceinline__ int bar_dq_full(int h) { return 2 + 2 * h; }
__device__ __forceinline__ int bar_dq_empty(int h) { return 3 + 2 * h; }

// The mbarriers: K and V loaded; stage s full (the producer's loads done); stage s empty (every
// consumer thread done with it).
__device__ __forceinline__ u32 kv_full(u32 bars) { return bars; }
__device__ __forceinline__ u32 q_full(u32 bars, int s) { return bars + 8 + 8 * s; }
__device__ __forceinline__ u32 q_empty(u32 bars, int s) { return bars + 24 + 8 * s; }

__device__ __forceinline__ void st_shared(u32 addr, u32 v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void st_shared4f(u32 addr, float a, float b, float c, float d)
{
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
                 : "memory");
}

__device__ __forceinline__ uint4 ld_shared4(u32 addr)
{
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}

__device__ __forceinline__ float2 ld_shared_f2(u32 addr)
{
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
    return v;
}

// Adds `bytes` of fp32 from shared memory into global memory: one bulk reduction, its own bulk
// group.
__device__ __forceinline__ void bulk_reduce_add(float *dst, u32 src, u32 bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 ::"l"(dst), "r"(src), "r"(bytes)
                 : "memory");
    bulk_commit();
}


// ---- shared-memory matrix descriptors (smem_desc, ft_sm90.cuh) of a tile of column blocks whose
// swizzled rows are SPAN bytes: Tile<SWB> the Q, dO, K and V tiles, Tile<ROW> the dSᵀ and Pᵀ
// tiles.
template <int SPAN> struct Tile {
    static constexpr int KK_PER_BLOCK = SPAN / 32; // k16 steps per column block

    // K-major operand: `rows` rows from row r0 (a multiple of 8), k16 step kk along the columns
    // (32 bytes inside a column block; the next block starts rows·SPAN bytes further); 8-row
    // groups 8·SPAN bytes apart.
    static __device__ __forceinline__ u64 kmajor(u32 tile, int rows, int r0, int kk)
    {
        return smem_desc<SPAN>(tile, (kk / KK_PER_BLOCK) * rows * SPAN + r0 * SPAN + (kk % KK_PER_BLOCK) * 32, 16,
                               8 * SPAN);
    }

    // MN-major operand: the tile's rows are the k dimension (16 rows per step kb), its column
    // blocks the m or n dimension from block cb0 on (rows·SPAN bytes apart: LBO); 8-row groups
    // 8·SPAN bytes apart (SBO).
    static __device__ __forceinline__ u64 mnmajor(u32 tile, int rows, int cb0, int kb)
    {
        return smem_desc<SPAN>(tile, cb0 * rows * SPAN + kb * 16 * SPAN, rows * SPAN, 8 * SPAN);
    }
};
using DT = Tile<SWB>; // Q, dO, K, V
using ST = Tile<ROW>; // dSᵀ, Pᵀ

// ---- the workspace -----------------------------------------------------------------------------
struct Workspace {
    float *dq;   // [b][hq][mbq] tiles of BM·D floats, in dq_index order
    float *lse2; // [b][hq][mbq·BM]
    float *dsum; // [b][hq][mbq·BM]
    float *dk;   // [b][hkv][nbk·BN][D], with kv_accum only (dv follows it directly)
    float *dv;
    int *dq_sem; // [b][hq][mbq], DET only
    int mbq, nbk;
    bool kv_accum; // GQA_ATOMIC and a call with groups: dK and dV summed in the workspace
};

// The regions one after the other, as ops/bwd.c's bwd_workspace counts them.
__device__ __forceinline__ Workspace workspace(const BwdParams &p)
{
    Workspace w;
    w.mbq = (p.seqlen_q + BM - 1) / BM;
    w.nbk = (p.seqlen_k + BN - 1) / BN;
    w.kv_accum = GQA_ATOMIC && p.heads_q > p.heads_kv;
    const long long rows = (long long)p.batch * p.heads_q * w.mbq * BM;
    const long long kv_rows = (long long)p.batch * p.heads_kv * w.nbk * BN;
    w.dq = p.ws;
    w.lse2 = p.ws + rows * D;
    w.dsum = w.lse2 + rows;
    float *after = w.dsum + rows;
    w.dk = w.dv = nullptr;
    if (w.kv_accum) {
        w.dk = after;
        w.dv = w.dk + kv_rows * D;
        after = w.dv + kv_rows * D;
    }
    w.dq_sem = DET ? (int *)after : nullptr;
    return w;
}

// Where consumer thread `t` (0..CT-1; warpgroup w = t / 128) keeps dQ accumulator i of a tile,
// in the staging buffer and the workspace alike: groups of four (two rows, two columns) of one
// thread are adjacent, and the threads' groups i / 4 follow each other, so that a warp's 16-byte
// accesses cover 512 contiguous bytes; staged, each warpgroup's 128·DQ_ALL accumulators one after
// the other (its hand-off's part), DQ_RED the two warpgroups' groups i / 4 in turn (a warpgroup's
// after the other's measured 5–9 % slower at d = 128 on 5 of 6 shapes, H200, 2026-12-03).
// Accumulator i is row (ROWSPLIT ? 64·w : 0) + 16·warp + g + 8·((i >> 1) & 1),
// column (ROWSPLIT ? 0 : w·DC) + 8·(i >> 2) + 2·(lane & 3) + (i & 1) (warp and lane within the
// warpgroup, g = lane >> 2): the wgmma accumulator layout. DQT, with pass = i / DQ_ACC and j = i %
// DQ_ACC, the same transposed: column w·DC + 64·pass + 16·warp + g + 8·((j >> 1) & 1), row
// 8·(j >> 2) + 2·(lane & 3) + (j & 1) (bwd_post reads them back).
__device__ __forceinline__ int dq_index(int t, int i)
{
    if (DQ_RED)
        return (i >> 2) * (CT * 4) + t * 4 + (i & 3);
    return (t / 128) * (128 * DQ_ALL) + (i >> 2) * (128 * 4) + (t % 128) * 4 + (i & 3);
}

// One bulk copy of `bytes` (a multiple of 16) from global into shared memory, completing on bar.
__device__ __forceinline__ void bulk_load(u32 dst, const void *src, u32 bytes, u32 bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// The tensor maps of Q, dO, K and V: boxes of CH elements (one column block, swizzled as the
// tiles are) by BM rows (Q, dO) or BN rows (K, V) of one head; rows past seqlen read as zeros.
struct Maps {
    const TensorMap *q, *dout, *k, *v;
};

// A [rows][D] tile at row r0 of one head into its column blocks at dst.
__device__ __forceinline__ void load_tile(u32 dst, const TensorMap *map, int rows, int r0, int head, int batch, u32 bar)
{
#pragma unroll
    for (int b = 0; b < D / CH; ++b)
        tma_load(dst + b * rows * SWB, map, b * CH, r0, head, batch, bar);
}

// The CTA's walk: `total` query blocks, block `it` of query head first_head + it / per_head
// (head_of), row block m_begin + (it + rot) % per_head (row_block). (The loops divide at every
// turn: a head and row block stepped along instead, 2026-12-06, measured the same on an H200 but left ptxas unable to keep
// them in uniform registers where one consumer warpgroup runs: 35 R2UR for 27 at d = 80.)
struct Walk {
    int batch, kv_head, n0, first_head, m_begin, per_head, total, rot;
};

// Block `it` of the walk: its query head and row block.
__device__ __forceinline__ int head_of(const Walk &w, int it)
{
    return w.first_head + it / w.per_head;
}

__device__ __forceinline__ int row_block(const Walk &w, int it)
{
    int r = it % w.per_head;
    if (QROT) {
        r += w.rot;
        if (r >= w.per_head)
            r -= w.per_head;
    }
    return w.m_begin + r;
}

__device__ __forceinline__ Walk walk_of(const BwdParams &p, const Workspace &ws)
{
    Walk w;
    if (LPT) {
        // Key blocks slowest: the CTAs launched first take key block 0 of every head (the
        // longest walks, causal), the last ones the shortest. (Sections of heads whose query
        // tiles share L2, as FA4 orders its deterministic mode, were tried: their causal twins of
        // the lpt=0 defaults ran 0.97–1.00 of them on the H200, 2026-12-03.)
        const int heads = (int)(gridDim.y * gridDim.z);
        const int linear = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
        w.n0 = linear / heads * BN;
        w.kv_head = linear % heads % (int)gridDim.y;
        w.batch = linear % heads / (int)gridDim.y;
    } else {
        // DET, causal: key blocks in descending order (the shortest walks first), the order in
        // which they add into each dQ tile.
        w.n0 = (DET && CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x) * BN;
        w.kv_head = (int)blockIdx.y;
        w.batch = (int)blockIdx.z;
    }
    int group = p.heads_q / p.heads_kv;
    if (GQA_ATOMIC) { // the grid's heads are query heads (ops/bwd.c): this one alone
        w.first_head = w.kv_head;
        w.kv_head /= group;
        group = 1;
    } else {
        w.first_head = w.kv_head * group;
    }
    // Causal: from the block of the first row that sees key n0 (row n0 - delta); none when that
    // row is past the last.
    w.m_begin = 0;
    if (CAUSAL) {
        const int first = w.n0 - (p.seqlen_k - p.seqlen_q);
        w.m_begin = first <= 0 ? 0 : first / BM;
    }
    w.per_head = ws.mbq > w.m_begin ? ws.mbq - w.m_begin : 0;
    w.total = w.per_head * group;
    w.rot = QROT && w.per_head > 0 ? w.n0 / BN % w.per_head : 0;
    return w;
}

// ---- the producer -------------------------------------------------------------------------------
// One thread of warp 0: K and V, then every block's stage (Q, dO, LSE·log2(e) and D) once the
// consumers have released it, each completing its mbarrier with the bytes it expects.
__device__ __forceinline__ void produce_loads(const BwdParams &p, const Workspace &ws, const Walk &w, const Maps &maps,
                                              u32 base, u32 bars)
{
    mbar_expect_tx(kv_full(bars), 2 * KV_BYTES);
    load_tile(base + OFF_K, maps.k, BN, w.n0, w.kv_head, w.batch, kv_full(bars));
    load_tile(base + OFF_V, maps.v, BN, w.n0, w.kv_head, w.batch, kv_full(bars));
    for (int it = 0; it < w.total; ++it) {
        const int stage = it & 1;
        const int head = head_of(w, it), q0 = row_block(w, it) * BM;
        const u32 full = q_full(bars, stage);
        if (it >= 2)
            mbar_wait(q_empty(bars, stage), ((it >> 1) - 1) & 1);
        mbar_expect_tx(full, 2 * QT_BYTES + 2 * BM * 4);
        load_tile(base + OFF_Q + stage * QT_BYTES, maps.q, BM, q0, head, w.batch, full);
        load_tile(base + OFF_DO + stage * QT_BYTES, maps.dout, BM, q0, head, w.batch, full);
        const long long row0 = ((long long)w.batch * p.heads_q + head) * (ws.mbq * BM) + q0;
        const u32 stat = base + OFF_STAT + stage * 2 * BM * 4;
        bulk_load(stat, ws.lse2 + row0, BM * 4, full);
        bulk_load(stat + BM * 4, ws.dsum + row0, BM * 4, full);
    }
}

// DET: waits until this CTA's turn to add into a dQ tile (*sem == place), then orders the
// bulk reduction (async proxy) after that acquire.
__device__ __forceinline__ void dq_turn(const int *sem, int place)
{
    while (load_acquire(sem) != place)
        asm volatile("nanosleep.u32 64;\n");
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// DET: once the reduction's additions are complete, the next key block's turn.
__device__ __forceinline__ void dq_pass_turn(int *sem)
{
    bulk_wait_all();
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
    add_release(sem, 1);
}

// Warp 1: each block's dQ partial from the staging buffer into its workspace tile. DET: in the
// tile's order of key blocks, 0, 1, … (causal: from the last that sees the tile down to 0, the
// CTAs launched in that order); every CTA waited on has a lower linear index, so it is resident
// or done.
__device__ __forceinline__ void produce_dq(const BwdParams &p, const Workspace &ws, const Walk &w, u32 base, int lane)
{
    constexpr int PART = BM * D / NWG; // floats of a warpgroup's hand-off
#pragma unroll
    for (int h = 0; h < NWG; ++h)
        named_arrive(bar_dq_empty(h), HAND_THREADS); // the buffer starts empty
    const int nb = w.n0 / BN;
    for (int it = 0; it < w.total; ++it) {
        const int head = head_of(w, it), m = row_block(w, it);
        const long long tile = ((long long)w.batch * p.heads_q + head) * ws.mbq + m;
        int *sem = DET ? ws.dq_sem + tile : nullptr;
        // Each share's reduction once its warpgroup has staged it (the two in flight at once) ...
#pragma unroll
        for (int h = 0; h < NWG; ++h) {
            named_sync(bar_dq_full(h), HAND_THREADS);
            if (lane == 0) {
                if (DET && h == 0) {
                    // The key blocks that see query block m: those below key_end (its last
                    // padded row's keys), counted down from the last.
                    const int key_end = min(p.seqlen_k, m * BM + BM + p.seqlen_k - p.seqlen_q);
                    dq_turn(sem, CAUSAL ? (key_end + BN - 1) / BN - 1 - nb : nb);
                }
                bulk_reduce_add(ws.dq + tile * (BM * D) + h * PART, base + OFF_DQ + h * PART * 4, PART * 4);
            }
        }
        if (DET && lane == 0)
            dq_pass_turn(sem);
        // ... and each part of the buffer handed back once its reduction has read it.
#pragma unroll
        for (int h = 0; h < NWG; ++h) {
            if (lane == 0) {
                if (h + 1 < NWG)
                    bulk_wait_read<1>(); // NWG is one or two
                else
                    bulk_wait_read<0>();
            }
            __syncwarp();
            if (it + 1 < w.total)
                named_arrive(bar_dq_empty(h), HAND_THREADS);
        }
    }
    if (lane == 0)
        bulk_wait_all();
}

// ---- the consumers ------------------------------------------------------------------------------
// A thread's LSE·log2(e) or D values (the pair of query columns q0c + 8·jj + 2·t4 for each jj),
// read from the stage into registers ahead of their use where that costs at most 16 registers
// and dK, dV leave them (SQ ≤ 64, and KVSPLIT's halves, D ≤ 128 with two consumers' 240
// registers, ≤ 96 with one's 255 and D/2 of dK and dV more each; past those, variants that
// fitted spill), so that the loads' latency hides under a product still running; else read
// where used.
constexpr bool PRELOAD = SQ <= 64 && (KVSPLIT || D <= 96 || (D <= 128 && NWG == 2));
struct Stats {
    float2 v[PRELOAD ? SQ / 8 : 1];

    __device__ __forceinline__ void load(u32 at, int q0c, int t4)
    {
        if (PRELOAD) {
#pragma unroll
            for (int jj = 0; jj < SQ / 8; ++jj)
                v[jj] = ld_shared_f2(at + 4 * (q0c + 8 * jj + 2 * t4));
        }
    }
    // Pair jj, which lies at `addr` in the stage.
    __device__ __forceinline__ float2 get(int jj, u32 addr) const { return PRELOAD ? v[jj] : ld_shared_f2(addr); }
};

// Step kb of dV += Pᵀ·dO: queries 16·kb.. of Pᵀ (packed, pf[4·kb..]) and of dO's tile at dot.
__device__ __forceinline__ void dv_step(float (&dv)[KN], const u32 (&pf)[SN / 2], u32 dot, int kb)
{
    ft_wgmma_kv(dv, pf[4 * kb], pf[4 * kb + 1], pf[4 * kb + 2], pf[4 * kb + 3], DT::mnmajor(dot, BM, 0, kb));
}

// Pᵀ = exp2(Sᵀ·scale·log2(e) − LSE·log2(e)), packed in pairs of adjacent query columns: pf[i/2]
// holds elements i and i + 1 (the A operand's order). Element i is key key0 + 8·((i >> 1) & 1),
// query column q0c + 8·(i >> 2) + 2·t4 + (i & 1). MASK: keys past seqlen_k, and causal keys past
// the row's last (row + delta), give 0. FUSED: dSᵀ = Pᵀ ∘ (dPᵀ − D) too, packed alike (dPᵀ
// done); else Pᵀ replaces Sᵀ in fp32 for grads (dPᵀ may still be running), and only PACK_P
// packs it now (else it is packed after grads, so fewer registers are live meanwhile).
// STREAM_DV: packed only (dSᵀ is made from the packed values, grads<true>), and dV += Pᵀ·dO
// (dot: dO's tile) issued a k16 step (16 query columns: two column pairs jj) at a time as soon as
// its columns are packed, one wgmma group committed after the last, so that the tensor cores
// start dV while the rest of the exponentials run.
template <bool MASK, bool FUSED, bool PACK_P>
__device__ __forceinline__ void probs(float (&s)[SN], const float (&dp)[SN], u32 (&pf)[SN / 2], u32 (&dsf)[SN / 2],
                                      float (&dv)[KN], u32 dot, const Stats &lse, const Stats &dsum, u32 stat,
                                      float scale_log2, int key0, int last0, int seqlen_k, int q0c, int t4)
{
    static_assert(!STREAM_DV || (PACK_P && !FUSED), "streamed dV steps take Pᵀ packed, dSᵀ made after");
#pragma unroll
    for (int jj = 0; jj < SQ / 8; ++jj) {
        const int col = q0c + 8 * jj + 2 * t4;
        const float2 l2 = lse.get(jj, stat + 4 * col);
        const float2 dd = FUSED ? dsum.get(jj, stat + 4 * (BM + col)) : make_float2(0.f, 0.f);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = 4 * jj + 2 * h;
            float x0 = ex2(fmaf(s[i], scale_log2, -l2.x));
            float x1 = ex2(fmaf(s[i + 1], scale_log2, -l2.y));
            if (MASK) {
                const int key = key0 + 8 * h;
                if (key >= seqlen_k || (CAUSAL && key > last0 + col))
                    x0 = 0.f;
                if (key >= seqlen_k || (CAUSAL && key > last0 + col + 1))
                    x1 = 0.f;
            }
            if (PACK_P || FUSED)
                pf[i / 2] = pack2(x0, x1);
            if (FUSED)
                dsf[i / 2] = pack2(x0 * (dp[i] - dd.x), x1 * (dp[i + 1] - dd.y));
            else if (!STREAM_DV)
                s[i] = x0, s[i + 1] = x1;
        }
        if (STREAM_DV && jj % 2 == 1) {
            wgmma_fence();
            dv_step(dv, pf, dot, jj / 2);
        }
    }
    if (STREAM_DV)
        wgmma_commit();
}

// Sᵀ = K·Qᵀ for the warpgroup's keys (from kw) and queries (from q0c) of the stage's Q tile at
// qt: one wgmma group.
__device__ __forceinline__ void issue_s(float (&s)[SN], u32 base, u32 qt, int kw, int q0c)
{
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
        ft_wgmma_st(s, DT::kmajor(base + OFF_K, BN, kw, kk), DT::kmajor(qt, BM, q0c, kk), kk > 0);
    wgmma_commit();
}

// dSᵀ = Pᵀ ∘ (dPᵀ − D), packed as probs packs Pᵀ; Pᵀ in fp32 (pt) or, PACKED (STREAM_DV: its
// fp32 values are not kept, for the registers the streamed steps need), as packed for dV (pf).
template <bool PACKED = false>
__device__ __forceinline__ void grads(const float (&pt)[SN], const u32 (&pf)[SN / 2], const float (&dp)[SN],
                                      u32 (&dsf)[SN / 2], const Stats &dsum, u32 stat, int q0c, int t4)
{
#pragma unroll
    for (int jj = 0; jj < SQ / 8; ++jj) {
        const int col = q0c + 8 * jj + 2 * t4;
        const float2 dd = dsum.get(jj, stat + 4 * (BM + col));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = 4 * jj + 2 * h;
            const float2 pr = PACKED ? unpack2(pf[i / 2]) : make_float2(pt[i], pt[i + 1]);
            dsf[i / 2] = pack2(pr.x * (dp[i] - dd.x), pr.y * (dp[i + 1] - dd.y));
        }
    }
}

// dV += Pᵀ·dO (k = the BM queries, 16 per step; dO the stage's tile at dot), one wgmma group.
__device__ __forceinline__ void issue_dv(float (&dv)[KN], const u32 (&pf)[SN / 2], u32 dot)
{
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < BM / 16; ++kb)
        dv_step(dv, pf, dot, kb);
    wgmma_commit();
}

// KVSPLIT: dV += Pᵀ·dO and dK += dSᵀ·Q for the warpgroup's DKV columns, Pᵀ and dSᵀ (both
// warpgroups' halves) from shared memory; two wgmma groups.
__device__ __forceinline__ void issue_dkv_shared(float (&dk)[KN], float (&dv)[KN], u32 pt, u32 ds, u32 qt, u32 dot,
                                                 int cw)
{
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < BM / 16; ++kb)
        ft_wgmma_kvs(dv, ST::kmajor(pt, BN, 0, kb), DT::mnmajor(dot, BM, cw * (DKV / CH), kb), 1);
    wgmma_commit();
#pragma unroll
    for (int kb = 0; kb < BM / 16; ++kb)
        ft_wgmma_kvs(dk, ST::kmajor(ds, BN, 0, kb), DT::mnmajor(qt, BM, cw * (DKV / CH), kb), 1);
    wgmma_commit();
}

// One pass of dQ's partial (m64n{PW} over the BN keys): the warpgroup's rows (ROWSPLIT) or its
// columns pass·PW.. of its DC columns; DQT those columns transposed (m64n{BM}: Kᵀ's columns as m,
// the dS tile's queries as n); one wgmma group.
__device__ __forceinline__ void issue_dq(float (&dq)[DQ_ACC], u32 ds, u32 kt, int cw, int pass)
{
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < BN / 16; ++kb) {
        const u64 k = DT::mnmajor(kt, BN, ((ROWSPLIT ? 0 : cw * DC) + pass * PW) / CH, kb);
        if (DQT)
            ft_wgmma_dq(dq, k, ST::kmajor(ds, BM, 0, kb), kb > 0);
        else
            ft_wgmma_dq(dq, ST::mnmajor(ds, BN, ROWSPLIT ? cw : 0, kb), k, kb > 0);
    }
    wgmma_commit();
}

// One pass of a consumer thread's dQ partial (DQ_ACC accumulators) into the staging buffer or,
// DQ_RED, added into the block's workspace tile.
__device__ __forceinline__ void emit_dq(const float (&dq)[DQ_ACC], u32 base, float *tile, int ct, int pass)
{
#pragma unroll
    for (int i = 0; i < DQ_ACC; i += 4) {
        const int at = dq_index(ct, pass * DQ_ACC + i);
        if (DQ_RED)
            red_add4(tile + at, dq[i], dq[i + 1], dq[i + 2], dq[i + 3]);
        else
            st_shared4f(base + OFF_DQ + 4 * at, dq[i], dq[i + 1], dq[i + 2], dq[i + 3]);
    }
}

// A warp's Pᵀ or dSᵀ (packed pairs, probs' order) into the block's tile at dst: row = the key in
// the CTA's block (from the warp's first key kr), column blocks of 64 queries (BN rows apart),
// 128-byte rows, 16-byte chunk j of row r at j ^ (r & 7). Four 8x8 matrices a store: keys kr..
// and kr + 8.. of two chunks of 8 queries, c = q0c/8 + i/2 and c + 1, from registers x[i] ..
// x[i + 3] (i a multiple of 4); lane l addresses row l % 8 of matrix l / 8, chunk c + l / 16.
// Each matrix's eight rows land in eight different 16-byte bank groups (the swizzle), so a store
// is conflict-free. With dst 1024-aligned a row's swizzled chunk is (row address + 16·(l/16 ^
// (r & 7))) ^ 16·c: one base register a thread and a constant a store.
__device__ __forceinline__ void store_keys_by_queries(u32 dst, const u32 (&x)[SN / 2], int kr, int q0c, int lane)
{
    const int r = kr + (lane & 7) + 8 * ((lane >> 3) & 1);
    const u32 row = dst + (u32)(r * ROW + 16 * ((lane >> 4) ^ (r & 7)));
#pragma unroll
    for (int i = 0; i < SN / 2; i += 4) {
        const int c = q0c / 8 + i / 2; // even: q0c is a multiple of 16
        stmatrix_x4((row + (u32)((c / 8) * BN * ROW)) ^ (u32)(16 * (c % 8)), x[i], x[i + 1], x[i + 2], x[i + 3]);
    }
}

// DQT: a warp's dSᵀ (packed pairs, probs' order) into the block's dS tile at dst transposed: row =
// the query, column blocks of 64 keys (BM rows apart), 128-byte rows, 16-byte chunk j of row q at
// j ^ (q & 7). The same four 8x8 matrices a store as store_keys_by_queries' (keys kr.. and
// kr + 8.. of query chunks c and c + 1), each stored transposed: lane l addresses query row
// 8·(c + l / 16) + l % 8 of matrix l / 8, the chunk of its keys kr + 8·((l / 8) & 1). A matrix's
// eight query rows put its chunk in eight different 16-byte bank groups: conflict-free. Every
// lane's row is l % 8 modulo 8, so its swizzled chunk is the same in every store: one base
// register and a constant a store.
__device__ __forceinline__ void store_queries_by_keys(u32 dst, const u32 (&x)[SN / 2], int kr, int lane)
{
    const int key = kr + 8 * ((lane >> 3) & 1), q = 8 * (lane >> 4) + (lane & 7);
    const u32 row = dst + (u32)((key / 64) * BM * ROW + q * ROW + 16 * (((key % 64) / 8) ^ (lane & 7)));
#pragma unroll
    for (int i = 0; i < SN / 2; i += 4)
        stmatrix_x4_trans(row + (u32)((i / 2) * 8 * ROW), x[i], x[i + 1], x[i + 2], x[i + 3]);
}

// Every product that reads a stage is done: the producer may refill it. Every consumer thread
// arrives (an arrival releases the arriving thread's own reads of the stage's LSE and D).
template <int A, int B>
__device__ __forceinline__ void release_stage(u32 bars, int stage, float (&dk)[A], float (&dv)[A], u32 (&pf)[B],
                                              u32 (&dsf)[B])
{
    fence_regs(dk);
    fence_regs(dv);
    fence_regs(pf);
    fence_regs(dsf);
    mbar_arrive(q_empty(bars, stage));
}

// Hands consumer warpgroup cw's staged dQ partial to the producer's bulk reduction: the fence
// makes this thread's staging stores visible to the async proxy (it waits for them), the
// arrival lets producer warp 1 go on.
__device__ __forceinline__ void hand_dq(int cw)
{
    fence_proxy_async();
    named_arrive(bar_dq_full(cw), HAND_THREADS);
}

// Consumer warpgroup cw (0..NWG-1), thread ct (0..CT-1) of the consumers.
__device__ __forceinline__ void consume(const BwdParams &p, const Workspace &ws, const Walk &w, u32 base, u32 bars,
                                        int cw, int ct)
{
    const int warp = (ct % 128) / 32, lane = ct % 32, g = lane >> 2, t4 = lane & 3;
    const int delta = p.seqlen_k - p.seqlen_q;
    // FT_HOLD_BASE (1 unless the source defines it 0): the shared-memory base and the barriers'
    // address held in registers from here on (bars too, though base + OFF_BAR: held from base
    // alone, the d = 128 trip is 4 instructions longer). Derived from the CTA's shared window
    // (S2UR of SR_CgaCtaId, the 1024-byte round-up, 19 uniform instructions), ptxas rebuilt them
    // at the top of every trip, ahead of the first Sᵀ wgmma. The d = 128 default's trip 424 → 415
    // instructions, lead before the first wgmma 49 → 43 (bf16, nvcc 13.0); over the whole sm_90a
    // space (NVRTC) 2142 of 2380 variants compile without spills where 2146 did (the four lost
    // are lpt = 1 causal ones), registers the same in 1834 of them, +1 to +3 in 252, fewer in 56;
    // every default the same but d = 80, 112, 144 (-2 to +2), none spilling. Timed alone on an
    // H100 against the same source without it (bench/results/h100-2026-12-07-hold/, cuDNN
    // interleaved, two runs): 1.000–1.014 per group at d = 64 and 128, single shapes ±5 %, so no
    // gain beyond the noise; kept for the shorter trip. (With FT_DESC64 on in both builds,
    // h100-2026-12-06-macros/, d = 128 non-causal had read 1.013 and 1.024.)
    if (FT_HOLD_BASE) {
        asm volatile("mov.b32 %0, %0;" : "+r"(base));
        asm volatile("mov.b32 %0, %0;" : "+r"(bars));
    }

    float dk[KN], dv[KN];
#pragma unroll
    for (int i = 0; i < KN; ++i)
        dk[i] = dv[i] = 0.f;

    // The warpgroup's keys (from kw in the CTA's block), queries of Sᵀ (from q0c) and columns of
    // dK and dV (from c0); this thread's keys: rows k0 and k0 + 8 of the Sᵀ accumulators.
    const int kw = KVSPLIT ? 0 : cw * 64, q0c = KVSPLIT ? cw * SQ : 0, c0 = KVSPLIT ? cw * DKV : 0;
    const int k0 = kw + warp * 16 + g, key0 = w.n0 + k0;
    float s[SN]; // S_AHEAD: in flight across the loop's turn
    if (w.total > 0) {
        mbar_wait(kv_full(bars), 0);
        if (S_AHEAD) {
            fence_regs(dk); // zeroed before the first Sᵀ is in flight, not while it is
            fence_regs(dv);
            mbar_wait(q_full(bars, 0), 0);
            issue_s(s, base, base + OFF_Q, kw, q0c);
        }
    }
    for (int it = 0; it < w.total; ++it) {
        const int stage = it & 1;
        const int head = head_of(w, it), m = row_block(w, it);
        mbar_wait(q_full(bars, stage), (it >> 1) & 1);

        const u32 qt = base + OFF_Q + stage * QT_BYTES, dot = base + OFF_DO + stage * QT_BYTES;
        const u32 stat = base + OFF_STAT + stage * 2 * BM * 4;
        float *const dq_tile = ws.dq + (((long long)w.batch * p.heads_q + head) * ws.mbq + m) * (BM * D);
        // LSE·log2(e) before the products are issued: loads issued behind dPᵀ's wgmmas, whose
        // operands fill the shared-memory pipe, returned after Sᵀ was done, and the first
        // exponential waited for them (11 % of the main kernel's stall samples at d = 128 8k on an
        // H100, 2026-12-06; FA4 loads its LSE between its Sᵀ wgmmas). Loaded after Sᵀ's issue
        // instead, as FA4 does (whose profile counts no shared-memory load conflicts where this
        // kernel's counts 10.7 M), they cost 2–3 % at d = 128 (bf16, 1k–16k, interleaved, three
        // rounds; H100, 2026-12-07, bench/results/h100-2026-12-07-late/).
        Stats lse, dsum;
        lse.load(stat, q0c, t4);
        if (!S_FIRST) // D too where the exponentials wait for dPᵀ and make dSᵀ at once
            dsum.load(stat + 4 * BM, q0c, t4);
        // Sᵀ (S_AHEAD: issued by the block before) and dPᵀ, two groups. EARLY_DV: Pᵀ, and dV's
        // product (which takes only Pᵀ), while dPᵀ runs; EXP_UNDER_DP: Pᵀ's exponentials while
        // dPᵀ runs; else both waited for first (fewer registers live at once).
        float dp[SN];
        if (!S_AHEAD) {
            issue_s(s, base, qt, kw, q0c);
        } else if (S_FIRST) {
            // Sᵀ (queued behind the last block's dK, most likely done) retired before dPᵀ is
            // issued: ptxas keeps the wgmmas asynchronous only if no group crosses the loop's
            // turn into one that reads Sᵀ while dPᵀ runs.
            wgmma_wait<0>();
            fence_regs(s);
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            ft_wgmma_st(dp, DT::kmajor(base + OFF_V, BN, kw, kk), DT::kmajor(dot, BM, q0c, kk), kk > 0);
        wgmma_commit();
        if (DQ_LATE && it > 0)
            hand_dq(cw); // the block before's, now that this block's products are queued
        // (S_FIRST: D is loaded while dPᵀ runs, after Pᵀ.)
        if (S_FIRST)
            wgmma_wait<1>();
        else
            wgmma_wait<0>();
        fence_regs(s);

        // The masks matter on the last key block and, causal, where the CTA's last key is past
        // the block's first row's last (the same for every thread of the CTA).
        const int last0 = m * BM + delta;
        u32 pf[SN / 2], dsf[SN / 2];
        if (!S_FIRST)
            fence_regs(dp);
        if (w.n0 + BN > p.seqlen_k || (CAUSAL && w.n0 + BN - 1 > last0))
            probs<true, !S_FIRST, EARLY_DV>(s, dp, pf, dsf, dv, dot, lse, dsum, stat, p.scale_log2, key0, last0,
                                            p.seqlen_k, q0c, t4);
        else
            probs<false, !S_FIRST, EARLY_DV>(s, dp, pf, dsf, dv, dot, lse, dsum, stat, p.scale_log2, key0, last0,
                                             p.seqlen_k, q0c, t4);
        if (S_FIRST)
            dsum.load(stat + 4 * BM, q0c, t4);
        if (EARLY_DV) {
            if (!STREAM_DV)
                issue_dv(dv, pf, dot);
            wgmma_wait<1>(); // dPᵀ
            fence_regs(dp);
            grads<STREAM_DV>(s, pf, dp, dsf, dsum, stat, q0c, t4);
        }
        if (EXP_UNDER_DP) {
            wgmma_wait<0>(); // dPᵀ
            fence_regs(dp);
            grads(s, pf, dp, dsf, dsum, stat, q0c, t4);
#pragma unroll
            for (int i = 0; i < SN; i += 2)
                pf[i / 2] = pack2(s[i], s[i + 1]);
        }

        // dSᵀ (KVSPLIT: and Pᵀ) to shared memory for the products that read it there.
        const u32 ds = base + OFF_DS + stage * DS_BYTES, pt = base + OFF_P + stage * DS_BYTES;
        if (DQT)
            store_queries_by_keys(ds, dsf, k0 - g, lane);
        else
            store_keys_by_queries(ds, dsf, k0 - g, q0c, lane);
        if (KVSPLIT)
            store_keys_by_queries(pt, pf, k0 - g, q0c, lane);
        fence_proxy_async();
        if (!EARLY_DV && !KVSPLIT)
            issue_dv(dv, pf, dot);

        named_sync(BAR_DS, CT); // every warp's dSᵀ (and Pᵀ) is in shared memory

        if (KVSPLIT) {
            // dV, dK and every pass of dQ's partial in flight at once; each pass, once done, out.
            issue_dkv_shared(dk, dv, pt, ds, qt, dot, cw);
            float dq[DQ_PASSES][DQ_ACC];
#pragma unroll
            for (int pass = 0; pass < DQ_PASSES; ++pass)
                issue_dq(dq[pass], ds, base + OFF_K, cw, pass);
            if (!DQ_RED)
                named_sync(bar_dq_empty(cw), HAND_THREADS);
#pragma unroll
            for (int pass = 0; pass < DQ_PASSES; ++pass) {
                if (pass + 1 < DQ_PASSES)
                    wgmma_wait<1>();
                else
                    wgmma_wait<0>();
                fence_regs(dq[pass]);
                emit_dq(dq[pass], base, dq_tile, ct, pass);
            }
        } else {
            // dQ's partial (this warpgroup's DC columns of its rows, PW per pass) = dS·K over all
            // BN keys, and with the last pass dK += dSᵀ·Q; each pass out once done (staged once
            // the producer has taken the last block's), the last while dK's product runs.
#pragma unroll
            for (int pass = 0; pass < DQ_PASSES; ++pass) {
                float dq[DQ_ACC];
                issue_dq(dq, ds, base + OFF_K, cw, pass);
                if (pass == DQ_PASSES - 1) {
#pragma unroll
                    for (int kb = 0; kb < BM / 16; ++kb)
                        ft_wgmma_kv(dk, dsf[4 * kb], dsf[4 * kb + 1], dsf[4 * kb + 2], dsf[4 * kb + 3],
                                    DT::mnmajor(qt, BM, 0, kb));
                    wgmma_commit();
                }
                if (pass == 0 && !DQ_RED)
                    named_sync(bar_dq_empty(cw), HAND_THREADS);
                if (pass == DQ_PASSES - 1)
                    wgmma_wait<1>();
                else
                    wgmma_wait<0>();
                fence_regs(dq);
                emit_dq(dq, base, dq_tile, ct, pass);
            }
        }
        // S_AHEAD: the next block's Sᵀ queued behind dK (its stage was filled while this block
        // ran). The last block issues one too, of its own stage (not yet released), unused: every
        // turn of the loop then carries the same in-flight accumulators, which ptxas needs to
        // keep the wgmmas asynchronous.
        if (S_AHEAD) {
            const bool next = it + 1 < w.total;
            if (next)
                mbar_wait(q_full(bars, stage ^ 1), ((it + 1) >> 1) & 1);
            issue_s(s, base, base + OFF_Q + (next ? stage ^ 1 : stage) * QT_BYTES, kw, q0c);
        }
        if (!DQ_RED && !DQ_LATE)
            hand_dq(cw);
        if (S_AHEAD)
            wgmma_wait<1>(); // dK; the next Sᵀ stays in flight
        else
            wgmma_wait<0>();
        release_stage(bars, stage, dk, dv, pf, dsf);
    }
    if (S_AHEAD)
        wgmma_wait<0>(); // the last block's unused Sᵀ
    if (DQ_LATE && w.total > 0)
        hand_dq(cw); // the last block's

    if (ws.kv_accum) {
        // Summed over the group's query heads in fp32 (the post kernel converts): this thread's
        // keys k0 and k0 + 8, two columns at a time, none past the head dim.
        const long long at = ((long long)w.batch * p.heads_kv + w.kv_head) * ws.nbk * BN + w.n0;
#pragma unroll
        for (int i = 0; i < KN; i += 2) {
            const int r = k0 + 8 * ((i >> 1) & 1), c = c0 + 8 * (i >> 2) + 2 * t4;
            if (w.n0 + r < p.seqlen_k && (D == DH || c < DH)) {
                red_add2(ws.dk + (at + r) * D + c, dk[i] * p.scale, dk[i + 1] * p.scale);
                red_add2(ws.dv + (at + r) * D + c, dv[i], dv[i + 1]);
            }
        }
        return;
    }
    // dK (scaled) and dV of this thread's keys (columns c0 + 8·(i >> 2) + 2·t4, two at a time)
    // into shared memory from OFF_K on, free once every consumer's last products are done: dK's
    // BN rows, then dV's, OUT_PITCH bytes apart; then written out a 16-byte chunk per thread.
    named_sync(BAR_DS, CT);
    const u32 out_k = base + OFF_K, out_v = out_k + BN * OUT_PITCH;
#pragma unroll
    for (int i = 0; i < KN; i += 2) {
        const int r = k0 + 8 * ((i >> 1) & 1);
        const u32 off = (u32)(r * OUT_PITCH + (c0 + 8 * (i >> 2)) * 2 + 4 * t4);
        st_shared(out_k + off, pack2(dk[i] * p.scale, dk[i + 1] * p.scale));
        st_shared(out_v + off, pack2(dv[i], dv[i + 1]));
    }
    named_sync(BAR_DS, CT);
    u16 *dkp = (u16 *)p.dk + w.batch * p.dk_batch_stride + w.kv_head * p.dk_head_stride;
    u16 *dvp = (u16 *)p.dv + w.batch * p.dv_batch_stride + w.kv_head * p.dv_head_stride;
    for (int k = ct; k < BN * CPR; k += CT) {
        const int r = k / CPR, c = k % CPR, key = w.n0 + r;
        const u32 off = (u32)(r * OUT_PITCH + c * 16);
        if (key < p.seqlen_k) {
            *(uint4 *)(dkp + key * p.dk_row_stride + c * 8) = ld_shared4(out_k + off);
            *(uint4 *)(dvp + key * p.dv_row_stride + c * 8) = ld_shared4(out_v + off);
        }
    }
}

// ---- the main kernel -----------------------------------------------------------------------------
__device__ __forceinline__ void bwd_main(const BwdParams &p, const Maps &maps)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const u32 bars = base + OFF_BAR;
    const int tid = (int)threadIdx.x, wg = tid / 128;
    const Workspace ws = workspace(p);
    const Walk w = walk_of(p, ws);

    if (tid == 0) {
        mbar_init(kv_full(bars), 1);
        for (int s = 0; s < 2; ++s) {
            mbar_init(q_full(bars, s), 1);
            mbar_init(q_empty(bars, s), CT); // one arrival per consumer thread
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        if (NWG > 1)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        const int warp = tid / 32, lane = tid % 32;
        if (w.total == 0)
            return;
        if (warp == 0) {
            if (lane == 0)
                produce_loads(p, ws, w, maps, base, bars);
        } else if (warp == 1 && !DQ_RED) {
            produce_dq(p, ws, w, base, lane);
        }
        return;
    }
    if (NWG > 1)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    // The consumer warpgroup's index, broadcast from lane 0: ptxas then knows it is the same in
    // every thread and keeps it, and the descriptors of the tiles its keys select, in uniform
    // registers (from threadIdx directly, each wgmma's descriptor was built in per-thread
    // registers and moved over with R2UR: ~2 of them a wgmma, 8 % of the kernel's instructions).
    consume(p, ws, w, base, bars, __shfl_sync(0xffffffffu, wg, 0) - 1, tid - 128);
}

// ---- the preprocessing kernel ---------------------------------------------------------------------
// D and LSE·log2(e) of query block blockIdx.x (bwd_row_stats, ft_bwd_pre.cuh); then the block's dQ
// accumulator tile zeroed (DET: and its counter), and with kv_accum its share of the dK and dV
// sums.
__device__ __forceinline__ void bwd_pre(const BwdParams &p)
{
    const int m = (int)blockIdx.x, head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const int tid = (int)threadIdx.x;
    const Workspace ws = workspace(p);
    const long long bh = (long long)batch * p.heads_q + head;
    bwd_row_stats<BM, CPR, THREADS>(p, m, head, batch, bh * (ws.mbq * BM) + m * BM, ws.dsum, ws.lse2);
    float4 *dq = (float4 *)(ws.dq + (bh * ws.mbq + m) * (BM * D));
    for (int i = tid; i < BM * D / 4; i += THREADS)
        dq[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (DET && tid == 0)
        ws.dq_sem[bh * ws.mbq + m] = 0;
    if (ws.kv_accum) // dK's and dV's sums (bwd_zero_kv_sums, ft_bwd_pre.cuh)
        bwd_zero_kv_sums<THREADS>(ws.dk, (long long)p.batch * p.heads_kv * ws.nbk * BN * D * 2 / 4);
}

// ---- the postprocessing kernel --------------------------------------------------------------------
// dQ accumulator tile blockIdx.x → dQ · scale: the tile's groups of four accumulators (two rows,
// two columns), consecutive threads reading consecutive groups, into a [BM][D] tile of the
// element type in shared memory (rows padded by 16 bytes), then written out a 16-byte chunk of a
// row per thread.
__device__ __forceinline__ void bwd_post(const BwdParams &p)
{
    constexpr int RW = D / 2 + 4; // 32-bit words per row of the tile
    __shared__ __align__(16) u32 tile[BM * RW];
    const int x = (int)blockIdx.x, head = (int)blockIdx.y, batch = (int)blockIdx.z;
    const Workspace ws = workspace(p);
    if (ws.kv_accum && head < p.heads_kv && x < ws.nbk) {
        // Key block x's dK and dV sums (bwd_store_kv_sums, ft_bwd_pre.cuh): the plan's grid covers
        // the key blocks too.
        const int n0 = x * BN;
        const long long at = (((long long)batch * p.heads_kv + head) * ws.nbk * BN + n0) * D;
        u16 *dk = (u16 *)p.dk + batch * p.dk_batch_stride + head * p.dk_head_stride + n0 * p.dk_row_stride;
        u16 *dv = (u16 *)p.dv + batch * p.dv_batch_stride + head * p.dv_head_stride + n0 * p.dv_row_stride;
        bwd_store_kv_sums<D, CPR, THREADS>(p, ws.dk + at, ws.dv + at, dk, dv, min(BN, p.seqlen_k - n0));
    }
    if (ws.kv_accum && x >= ws.mbq)
        return; // a block for the dK and dV sums alone (only kv_accum's grid has them: ops/bwd.c)
    const float *src = ws.dq + (((long long)batch * p.heads_q + head) * ws.mbq + x) * (BM * D);
    u16 *dq = (u16 *)p.dq + batch * p.dq_batch_stride + head * p.dq_head_stride;

    constexpr int GROUPS = DQ_ALL / 4; // of four accumulators per consumer thread
    for (int k = (int)threadIdx.x; k < CT * GROUPS; k += THREADS) {
        const int t = k % CT, i = 4 * (k / CT);
        const int wgt = t / 128, lane = t % 32;
        const float4 a = *(const float4 *)(src + dq_index(t, i));
        if (DQT) {
            // (column, row), (column, row + 1), (column + 8, row), (column + 8, row + 1)
            const int j = i % DQ_ACC;
            const int col = wgt * DC + 64 * (i / DQ_ACC) + 16 * ((t % 128) / 32) + (lane >> 2);
            const int row = 8 * (j >> 2) + 2 * (lane & 3);
            const u32 r0 = pack2(a.x * p.scale, a.z * p.scale), r1 = pack2(a.y * p.scale, a.w * p.scale);
            u16 *const h = (u16 *)tile;
            h[row * 2 * RW + col] = (u16)r0, h[row * 2 * RW + col + 8] = (u16)(r0 >> 16);
            h[(row + 1) * 2 * RW + col] = (u16)r1, h[(row + 1) * 2 * RW + col + 8] = (u16)(r1 >> 16);
        } else {
            const int row = (ROWSPLIT ? 64 * wgt : 0) + 16 * ((t % 128) / 32) + (lane >> 2);
            const int col = (ROWSPLIT ? 0 : wgt * DC) + 8 * (i >> 2) + 2 * (lane & 3);
            tile[row * RW + col / 2] = pack2(a.x * p.scale, a.y * p.scale);
            tile[(row + 8) * RW + col / 2] = pack2(a.z * p.scale, a.w * p.scale);
        }
    }
    __syncthreads();
    for (int k = (int)threadIdx.x; k < BM * CPR; k += THREADS) {
        const int row = k / CPR, c = k % CPR, q = x * BM + row;
        if (q < p.seqlen_q)
            *(uint4 *)(dq + q * p.dq_row_stride + c * 8) = *(const uint4 *)&tile[row * RW + 4 * c];
    }
}

} // namespace ft

// The generated entry points: FT_DEFINE_KERNEL(name) at the end of each generated source.
#define FT_DEFINE_KERNEL(name)                                                                         \
    extern "C" __global__ void __launch_bounds__(ft::THREADS) name##_pre(const ft::BwdParams p)         \
    {                                                                                                  \
        ft::bwd_pre(p);                                                                                \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, 1)                                       \
        name(const ft::BwdParams p, const __grid_constant__ ft::TensorMap tq,                          \
             const __grid_constant__ ft::TensorMap tdo, const __grid_constant__ ft::TensorMap tk,      \
             const __grid_constant__ ft::TensorMap tv)                                                 \
    {                                                                                                  \
        const ft::Maps maps = {&tq, &tdo, &tk, &tv};                                                   \
        ft::bwd_main(p, maps);                                                                         \
    }                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ft::THREADS) name##_post(const ft::BwdParams p)        \
    {                                                                                                  \
        ft::bwd_post(p);                                                                               \
    }
