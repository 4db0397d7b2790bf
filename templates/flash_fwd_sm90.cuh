// flash_fwd_sm90 — warp-specialised FlashAttention forward for compute capability 9.0 (sm_90a).
//
// A CTA works through blocks of BM query rows of one (batch, head) each, in units numbered
// blockIdx.x, blockIdx.x + gridDim.x, ..., so the loads of one block overlap the end of the
// previous one. Non-causal, the grid is persistent (at most one CTA per multiprocessor) and a
// unit is one block. Causal blocks differ in length: without BALANCE the grid has one CTA per
// block and the hardware hands them out as CTAs finish; with BALANCE the grid is persistent
// and a unit is two blocks of one head, its i-th longest and its i-th shortest, whose K/V
// tiles add up to about the same count for every i, so CTAs stay in step and the ones working
// at the same time share a few heads' K and V in the L2 cache. With DYNAMIC the grid is
// persistent too and each CTA takes its next block from a counter in the workspace as it
// needs one, the blocks in longest-first order within sections of heads whose K and V fit in
// the L2 cache together (see lpt_item): the longest-processing-time-first list schedule.
// Warpgroup 0 is the producer: one of its threads walks the CTA's blocks, announces each to
// the consumers in a shared-memory slot, loads its Q tile and streams the K and V tiles
// through a STAGES-deep ring of shared-memory buffers with the tensor-memory accelerator
// (cp.async.bulk.tensor, tensor maps encoded on the host), each load completing on an
// mbarrier; the ring's position carries over from one block to the next. Warpgroups 1..NWG
// are consumers; each owns 64 query rows and computes S = Q·Kᵀ with wgmma (both operands in shared memory)
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
// PINGPONG (two or three consumer warpgroups): named barriers make the warpgroups issue their
// wgmmas in turn, round robin, so one warpgroup's softmax runs while another's matrix products
// use the tensor cores (with three: FlashAttention-4's scheduler barrier at head dims up to 128,
// 192-row tiles).
// PSMEM: P_j goes to shared memory (stmatrix, each warpgroup its own 64 × BN tile, laid out as
// TMA would write a K-major tile) instead of staying in registers as P·V's A operand, and P·V
// reads it from there (both operands in shared memory): the BN/4 registers of packed P are free,
// which is what lets 192-row tiles take wide key tiles (FlashAttention-4's 192 × 144 at head dims
// up to 96: "RS is catastrophic with 192× tiles", its _tile_size_fwd_sm90). P_j is written once
// P_{j-1}·V_{j-1} is done (the step waits for it before the softmax's last part), so one tile a
// warpgroup is enough; a proxy fence and the warpgroup's named barrier order the stores before
// the wgmma that reads them.
// OSTORE: O leaves through shared memory. Each consumer warpgroup writes its 64 normalised rows
// (stmatrix) over its own rows of the block's Q buffer, which no wgmma reads any more once the
// block's last S is done, laid out as TMA writes Q there; one thread of the warpgroup stores them
// with TMA (cp.async.bulk.tensor, a tensor map of O whose boxes are 64 rows: the whole rows of a
// warpgroup in as many stores as a tile has column blocks), and the warpgroup releases the block
// (its Q buffer) only once that store has read them. The consumers' warps issue 8 stmatrix
// instead of D/4 stores of 4 bytes a thread, and the stores reach global memory in whole rows.
// A variable-length batch's warpgroup whose rows run past its sequence stores from registers as
// without OSTORE (a box would write into the next sequence's rows; a dense tensor's map ends at
// seqlen_q). With two Q buffers the next block's Q loads meanwhile; with one (LATE_Q: d = 192, 256 at
// 128 rows) the producer loads the next block's first K and V tiles before it waits for the
// store, and its Q after (FlashAttention-4's sm90 forward stores O over its one Q tile too).
// EARLY_RESCALE (with OVERLAP): O is rescaled by the previous tile's factors right after S_j is
// issued, while the tensor cores compute it, and P_{j-1}·V_{j-1} is issued after that (O then
// holds the sum relative to the previous tile's maxima until the P·V of that tile is added):
// FlashAttention-4's "rescale O before the GEMM" for wide O (head dims above 128), where the
// rescale otherwise sits between P·V's completion and the next issue.
// CHAIN (OVERLAP 2, without PINGPONG): a block's last P·V is not issued at its end but with
// the next block's first S (iteration 0 of the next block issues S_0 and the last P·V of the
// one before together, and runs S_0's softmax while that P·V is in flight); the earlier
// block's O is then normalised and stored. Without it, each block begins with an S that nothing
// overlaps and ends with a P·V that nothing overlaps: at 512 keys and 128-key tiles two of a
// block's five tensor-core phases. The pending block's O, P and row statistics stay in the
// consumer's registers between blocks (Chain); before a block without keys, after a block whose
// only tile was narrow, and at the end, its last P·V runs alone as without CHAIN (drain).
// PACK: a row block's BM rows are the G query heads of one K/V head at BM / G positions, row
// r = position r / G, head r % G (FlashAttention-4's pack_gqa): a block reads its K/V head's tiles
// once for all of its group's heads, and the walk numbers blocks per (batch, K/V head). Q comes
// in one TMA box of G heads by BM / G positions (a map of Q as (element, head, position, batch),
// encoded so by the host), which lands in shared memory as the unpacked BM-row tile; O leaves
// likewise (OSTORE) or from registers, each row to its head. A row's masks take its position.
// Only where G divides 64 (a consumer warpgroup's rows, O's boxes) and neither sequence is
// packed (pack_shift); otherwise the kernel runs unpacked, one head a block, as ops/fwd.c plans.
//
// Conventions are those of flash_fwd_sm80 (the runtime and the reference rely on them):
// Q, O [batch, seqlen_q, heads_q, D], K, V [batch, seqlen_k, heads_kv, D] up to strides (in
// elements, multiples of 8; base pointers 16-byte aligned), grouped-query heads, bottom-right
// causal alignment, O = 0 and LSE = +inf for a row that sees no key, LSE fp32 natural log.
// Variable-length batches (cu_seqlens_q, cu_seqlens_k, given with the packed tensors' rows) are
// read through tensor maps of the packed tensors (see Block); a block's sequence comes to the
// consumers in its slot.
//
// Shared memory: tiles are stored as DK/CH column blocks of [rows][CH] elements, rows of
// CH·2 bytes swizzled as TMA's SWIZZLE_128B (CH = 64), SWIZZLE_64B (CH = 32) or SWIZZLE_32B
// (CH = 16: DK an odd multiple of 16, such as 80 and 112) writes them, which is also wgmma's
// canonical K-major layout (Q, K) and MN-major layout (V). DK is D rounded up to whole k16
// steps of Q·Kᵀ: at a head dim that is an odd multiple of 8 (72, 88, 120, ...) a tile's last
// 8 columns lie past the tensors' head dim, which the tensor maps' innermost extent is, so TMA
// fills them with zeros (the last k16 step of S adds 0·0) and reads nothing past the tensor.
// P·V is m64n{DK}k16 too: an MN-major operand's swizzled layout repeats in whole column blocks,
// so V is read as whole blocks and O's DK − D columns past the head dim are zeros that are
// never stored (4 accumulators a thread); O's stores and the LSE cover D columns exactly.
//
// Compile-time parameters, defined by the generated prelude:
//   FTP_D        head dimension (a multiple of 8 from 32 to 256)
//   FTP_BM       query rows per CTA: 64 per consumer warpgroup (64, 128, 192)
//   FTP_BN       keys per K/V tile (a multiple of 16, at most 256)
//   FTP_STAGES   depth of the K/V ring (2..4)
//   FTP_CAUSAL   0 or 1                 FTP_PINGPONG  1: consumer warpgroups take turns (BM 128, 192)
//   FTP_OVERLAP  1: softmax of S_j while P_{j-1}·V_{j-1} runs; 2: also across blocks (CHAIN)
//   FTP_BALANCE  (causal) 1: persistent grid, units of a long and a short block; 2 (DYNAMIC):
//                persistent grid, blocks longest first from a counter (FwdParams::ws: an int the
//                launch plan zeroes; without a workspace each CTA takes every gridDim.x-th)
//   FTP_PSMEM    1: P through shared memory (see PSMEM above)
//   FTP_PEXP     of every 8 exponentials of the softmax, how many the FMA pipe computes
//                (ft_exp2_poly, ft_exp2.cuh) instead of the multi-function unit (0..8)
//   FTP_SKIP_RESCALE 1: O is rescaled only in warps where some row found a new maximum (see
//                softmax_step); the others' factors are exactly 1
//   FTP_OSTORE   1: O through shared memory and TMA stores (see OSTORE above)
//   FTP_EARLY_RESCALE 1: O rescaled while S_j is computed (see EARLY_RESCALE above)
//   FTP_PACK     1: a block's rows are a group's query heads times positions (see PACK above)
//   FTP_CTAS     CTAs a multiprocessor holds (the launch bounds): 1, or 2 with one consumer
//                warpgroup, each CTA launched at 128 registers a thread, its producer giving 104
//                of them to the consumer (setmaxnreg: 24 and 232)
//   FTP_DTYPE_F16 or FTP_DTYPE_BF16      FT_SMEM_BYTES  dynamic shared memory
// and the generated wgmma wrappers ft_wgmma_s (m64n{BN}k16, both operands from shared memory)
// and ft_wgmma_o (m64n{DK}k16, A from registers; PSMEM: ft_wgmma_op, A K-major from shared
// memory). The shared device headers below are written into the generated source in place of
// their #include lines.

#if !defined(FTP_D) || !defined(FTP_BM) || !defined(FTP_BN) || !defined(FTP_STAGES) ||              \
    !defined(FTP_CAUSAL) || !defined(FTP_PINGPONG) || !defined(FTP_OVERLAP) || !defined(FTP_BALANCE) ||    \
    !defined(FTP_PSMEM) || !defined(FTP_PEXP) || !defined(FTP_SKIP_RESCALE) || !defined(FTP_OSTORE) ||                 \
    !defined(FTP_EARLY_RESCALE) || !defined(FTP_CTAS) || !defined(FTP_PACK) || !defined(FT_SMEM_BYTES)
#error "flash_fwd_sm90 needs FTP_D, FTP_BM, FTP_BN, FTP_STAGES, FTP_CAUSAL, FTP_PINGPONG, FTP_OVERLAP, FTP_BALANCE, FTP_PSMEM, FTP_PEXP, FTP_SKIP_RESCALE, FTP_OSTORE, FTP_EARLY_RESCALE, FTP_CTAS, FTP_PACK and FT_SMEM_BYTES"
#endif
#if defined(FTP_DTYPE_F16) == defined(FTP_DTYPE_BF16)
#error "flash_fwd_sm90 needs exactly one of FTP_DTYPE_F16 and FTP_DTYPE_BF16"
#endif
#ifndef FT_QW // see Consumer::sq
#define FT_QW 0
#endif

#include "ft_device.cuh"
#include "ft_params.cuh"
#include "ft_sm90.cuh"
#include "ft_softmax.cuh"
#include "ft_exp2.cuh"
#include "ft_sched.cuh"

namespace ft {

constexpr int D = FTP_D;
constexpr int BM = FTP_BM;
constexpr int BN = FTP_BN;
constexpr int STAGES = FTP_STAGES;
constexpr bool CAUSAL = FTP_CAUSAL != 0;
constexpr bool PINGPONG = FTP_PINGPONG != 0;
constexpr bool OVERLAP = FTP_OVERLAP != 0;
constexpr bool BALANCE = FTP_BALANCE == 1;
constexpr bool DYNAMIC = FTP_BALANCE == 2;
constexpr bool PSMEM = FTP_PSMEM != 0;
constexpr int PEXP = FTP_PEXP;
constexpr bool SKIP_RESCALE = FTP_SKIP_RESCALE != 0;
constexpr bool OSTORE = FTP_OSTORE != 0;
constexpr bool EARLY_RESCALE = FTP_EARLY_RESCALE != 0;
constexpr bool CHAIN = FTP_OVERLAP == 2;
constexpr bool PACK = FTP_PACK != 0;

constexpr int NWG = BM / 64;             // consumer warpgroups
constexpr int THREADS = 128 * (NWG + 1); // plus the producer warpgroup
constexpr int DK = (D + 15) / 16 * 16;    // columns of a tile in shared memory (see above)
constexpr int CH = DK % 64 == 0 ? 64 : DK % 32 == 0 ? 32 : 16; // elements per swizzled row of a column block
constexpr int SWB = CH * 2;               // its bytes: the swizzle span (128, 64 or 32)
constexpr int NCB = DK / CH;              // column blocks of a tile
constexpr int Q_BYTES = BM * DK * 2;
constexpr int KV_BYTES = BN * DK * 2; // one K or one V tile
constexpr int NSLOTS = 4;            // block slots (see block_slot)
constexpr int SLOT_BYTES = 32;      // one block slot (see block_slot)
constexpr int BAR_BYTES = 8 * (8 + 4 * STAGES) + SLOT_BYTES * NSLOTS; // the mbarriers and the block slots
// PSMEM: each consumer warpgroup's P tile, 64 rows by BN keys in column blocks of PCH keys, rows
// of PCH·2 bytes swizzled as TMA's SWIZZLE_{PSWB}B writes them (wgmma's canonical K-major layout);
// the tiles start on the next 1024-byte boundary after the K/V ring.
constexpr int PCH = BN % 64 == 0 ? 64 : BN % 32 == 0 ? 32 : 16; // keys per swizzled row of a column block
constexpr int PSWB = PCH * 2;
constexpr int P_WG_BYTES = 64 * BN * 2;
constexpr int P_BYTES = PSMEM ? NWG * P_WG_BYTES : 0;
__host__ __device__ constexpr int align_1k(int x) { return (x + 1023) / 1024 * 1024; }
// The bytes up to the barriers, from the aligned base, with `q_bufs` Q buffers (Q_BYTES is a
// multiple of 2048: the alignment before P is the same with one buffer or two).
__host__ __device__ constexpr int body_bytes(int q_bufs)
{
    return PSMEM ? align_1k(q_bufs * Q_BYTES + 2 * STAGES * KV_BYTES) + P_BYTES : q_bufs * Q_BYTES + 2 * STAGES * KV_BYTES;
}
constexpr int SMEM_ONE_Q = 1024 + body_bytes(1) + BAR_BYTES;
// Two Q buffers where they fit (the spec decides, from the target's shared memory per block,
// and FT_SMEM_BYTES says which): the next block's Q then loads while this block computes.
constexpr int Q_BUFS = FT_SMEM_BYTES == SMEM_ONE_Q + Q_BYTES ? 2 : 1;
constexpr int SMEM_BYTES = SMEM_ONE_Q + (Q_BUFS - 1) * Q_BYTES;
constexpr int SN = BN / 2; // S accumulators per thread
constexpr int ON = DK / 2; // O accumulators per thread (columns past D: zeros)
constexpr int PN = PSMEM ? 1 : BN / 4; // registers of packed P a thread holds (PSMEM: none used)
// Causal: a consumer warpgroup whose rows see only the first NARROW keys of its first tile
// (the diagonal tile of the upper warpgroups, whose rows end before the block's last row)
// takes the softmax of those keys only (the first SNN accumulators of S) and P·V over them:
// half that tile's exponentials and half its P·V. NARROW is half a tile rounded up to whole
// k16 steps of P·V. S itself stays a full-width wgmma: with a narrower one beside it, ptxas
// serialised the wgmmas of one causal variant in six (C7511, not enough registers).
constexpr int NARROW = (BN / 2 + 15) / 16 * 16;
constexpr bool USE_NARROW = CAUSAL && NARROW < BN;
constexpr int SNN = NARROW / 2;

static_assert(D % 8 == 0 && D >= 32 && D <= 256, "head dimension must be a multiple of 8 from 32 to 256");
static_assert(BM % 64 == 0 && NWG >= 1 && NWG <= 3, "64 query rows per consumer warpgroup, 1 to 3 warpgroups");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "key tile must be a multiple of 16, at most 256");
static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 pipeline stages");
static_assert(PEXP >= 0 && PEXP <= 8, "of every 8 exponentials, 0 to 8 by FMA");
static_assert(!PINGPONG || NWG >= 2, "ping-pong takes two or three consumer warpgroups");
static_assert(FTP_BALANCE >= 0 && FTP_BALANCE <= 2, "balance 0, 1 or 2");
static_assert(FTP_BALANCE == 0 || CAUSAL, "balanced units and the longest-first order are for causal blocks");
static_assert(SMEM_BYTES == FT_SMEM_BYTES, "the spec's smem formula disagrees with this template's layout");
static_assert(Q_BYTES % 2048 == 0, "one Q buffer or two: the same alignment before the P tiles");
static_assert(P_WG_BYTES % 1024 == 0, "each warpgroup's P tile on a 1024-byte boundary");
static_assert(BAR_BYTES % 16 == 0, "the barriers keep the block slots 16-byte aligned");
// OSTORE with one Q buffer: the buffer is free only once O has left it, at the very end of a
// block, so the producer loads a block's first K and V tiles before it waits for that.
constexpr bool LATE_Q = OSTORE && Q_BUFS == 1;
static_assert(!LATE_Q || !CHAIN, "O through the only Q buffer ends a block before the next one's first S");
static_assert(!EARLY_RESCALE || OVERLAP, "the early rescale is a step of the overlapped schedule");
static_assert(FTP_OVERLAP >= 0 && FTP_OVERLAP <= 2, "overlap 0, 1 or 2");
static_assert(!CHAIN || !PINGPONG, "blocks overlapped across take no ping-pong turns");

// Registers per thread after setmaxnreg: the producer gives its registers to the consumers
// (with one consumer warpgroup only where two CTAs share the multiprocessor: each launches at
// 128 a thread, 32768 for its 256 threads, of which the producer keeps 24 a thread).
constexpr int CTAS = FTP_CTAS;
constexpr bool SHARE_REGS = NWG > 1 || CTAS > 1;
// With three consumer warpgroups at 160, 32 for the producer still fits (32 + 3 · 160 = 512 a
// thread's share of the 64K, FlashAttention-3's split, hopper/flash_fwd_kernel_sm90.h); PACK
// takes it: the packed walk's arithmetic spilled the producer at 24 (d = 64, 192 × 128, causal,
// balance = 2: 8 bytes, none at 32). Unpacked kernels keep 24, the code the GPU verified.
constexpr int PRODUCER_REGS = PACK && NWG == 3 ? 32 : 24;
constexpr int CONSUMER_REGS = NWG == 2 ? 240 : NWG == 3 ? 160 : 232;
static_assert(128 * (PRODUCER_REGS + NWG * CONSUMER_REGS) <= 65536 || CTAS > 1, "the register split fits the file");
static_assert(CTAS == 1 || (CTAS == 2 && NWG == 1), "two CTAs a multiprocessor take one consumer warpgroup each");
static_assert(CTAS == 1 || 128 * (PRODUCER_REGS + CONSUMER_REGS) <= 65536 / 2, "the register split fits the launch's");

// Named barriers (0 is __syncthreads): ping-pong turns (turn_bar); 3 + w: every thread of
// consumer w has written its part of the warpgroup's P tile (PSMEM, store_p) or O tile
// (OSTORE, store_o).
constexpr int BAR_TURN = 1; // BAR_TURN + w: consumer w (0 or 1) may issue its wgmmas
constexpr int BAR_WG = 3;   // BAR_WG + w: consumer w's own
constexpr int BAR_TURN2 = 6; // consumer 2 may issue its wgmmas (three consumer warpgroups)

// The barrier on which consumer w waits for its turn; the turn passes from w to w + 1 (mod NWG).
__device__ __forceinline__ int turn_bar(int w) { return NWG == 3 && w == 2 ? BAR_TURN2 : BAR_TURN + w; }
__device__ __forceinline__ int next_turn(int w) { return NWG == 2 ? 1 - w : w == NWG - 1 ? 0 : w + 1; }

// ---- shared-memory matrix descriptors (smem_desc, ft_sm90.cuh) -------------------------------

// K-major operand (Q or K): 8-row groups SBO = 8 rows apart; a k16 step moves 32 bytes along
// the row inside a column block, the next column block starts rows·SWB bytes further.
__device__ __forceinline__ u64 kmajor_desc(u32 tile, int rows, int kk)
{
    constexpr int KK_PER_BLOCK = CH / 16;
    return smem_desc<SWB>(tile, (kk / KK_PER_BLOCK) * rows * SWB + (kk % KK_PER_BLOCK) * 32, 16, 8 * SWB);
}

// MN-major operand (V as B of P·V, stored [key][d]): CH-wide d chunks are BN·SWB bytes apart
// (LBO), 8-key groups 8·SWB apart (SBO); a k16 step moves 16 keys.
__device__ __forceinline__ u64 v_desc(u32 tile, int kb)
{
    return smem_desc<SWB>(tile, kb * 16 * SWB, BN * SWB, 8 * SWB);
}

// PSMEM: a warpgroup's P tile as P·V's K-major A operand, k16 step kb (16 keys): as kmajor_desc,
// in the P tile's column blocks of PCH keys and 64 rows.
__device__ __forceinline__ u64 p_desc(u32 tile, int kb)
{
    constexpr int KK_PER_BLOCK = PCH / 16;
    return smem_desc<PSWB>(tile, (kb / KK_PER_BLOCK) * 64 * PSWB + (kb % KK_PER_BLOCK) * 32, 16, 8 * PSWB);
}

// ---- blocks of query rows and the order of a CTA's blocks -------------------------------------
// One block of query rows: which rows of which sequence, of which head, and how many K/V tiles
// they need. A variable-length batch (cu_seqlens_q, cu_seqlens_k; see Seq) is read through
// tensor maps of the packed tensors as one batch: a block's tiles start at its sequence's first
// row (q0, k0) and run on into the next sequence's rows, which the mask and the stores leave out.
struct Block {
    int q_first, q_valid; // in the sequence (PACK: positions)
    int head, kv_head, batch; // PACK: head is the first of the block's heads
    int pack;             // pack_shift
    int n_tiles;          // 0: every row sees no key
    int sq, sk, q0, k0;   // the sequence (Seq)
};

// PACK: log2 of the query heads a block holds at each position, G's where G (the query heads
// per K/V head) divides 64 and neither sequence is packed, else 0: one head a block, as without
// PACK. ops/fwd.c (ft__fwd_pack) decides the same for the grid and the tensor maps.
__device__ __forceinline__ int pack_shift(const FwdParams &p)
{
    if (!PACK || p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr)
        return 0;
    const int g = p.heads_q / p.heads_kv;
    return g > 1 && 64 % g == 0 ? __ffs(g) - 1 : 0;
}

// The units the walk numbers blocks of, per batch: query heads, or (PACK) groups of them.
__device__ __forceinline__ int head_units(const FwdParams &p) { return p.heads_q >> pack_shift(p); }

// Row blocks of the batch's longest sequence: the walk numbers the blocks of each (batch, head)
// by it, and skips those a shorter sequence of a variable-length batch does not have. (PACK: of
// BM >> pack_shift positions each.)
__device__ __forceinline__ int max_blocks(const FwdParams &p)
{
    const int qb = BM >> pack_shift(p);
    return (p.seqlen_q + qb - 1) / qb;
}

__device__ __forceinline__ int seq_blocks(const FwdParams &p, int b)
{
    if (p.cu_seqlens_q == nullptr)
        return max_blocks(p);
    return (max(0, min(p.seqlen_q, p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b])) + BM - 1) / BM;
}

// Blocks of one (batch, head) are numbered consecutively, so the CTAs working at the same time
// share few heads' K and V in the L2 cache; the longest causal rows come first in each head.
// item = (batch · heads_q + head) · max_blocks + k, k < the sequence's row blocks (PACK: heads_q
// and head counted in groups, head_units).
__device__ __forceinline__ Block block_of(const FwdParams &p, int item)
{
    const int hb = item / max_blocks(p), k = item % max_blocks(p);
    Block b;
    b.pack = pack_shift(p);
    const int units = p.heads_q >> b.pack, qb = BM >> b.pack;
    b.head = (hb % units) << b.pack;
    b.batch = hb / units;
    b.kv_head = b.head / (p.heads_q / p.heads_kv);
    const Seq s = sequence(p, b.batch);
    b.sq = s.sq, b.sk = s.sk, b.q0 = s.q0, b.k0 = s.k0;
    b.q_first = ((s.sq + qb - 1) / qb - 1 - k) * qb;
    b.q_valid = min(qb, s.sq - b.q_first);
    // Keys the block needs: all of them, or (causal) up to the diagonal of its last row.
    const int key_end = keys_seen<CAUSAL>(b.q_first, b.q_valid, s.sk, s.sk - s.sq);
    b.n_tiles = key_end > 0 ? (key_end + BN - 1) / BN : 0;
    return b;
}

// DYNAMIC: the block number (for block_of) at position idx of the longest-first order
// (ft_sched.cuh: sections of (batch, head) pairs whose K and V share the L2, longest first in each).
__device__ __forceinline__ int lpt_item(const FwdParams &p, int idx, int m)
{
    const int heads = head_units(p) * p.batch; // PACK: a unit is a whole group
    return ft_sched_item(idx, m, heads,
                         ft_sched_section(heads, (p.heads_q / p.heads_kv) >> pack_shift(p), p.seqlen_k, DK));
}

// The blocks a CTA works on, in order (see the top of the file), walked by the producer: a unit
// is one block, or with BALANCE the blocks k = i and k = m - 1 - i of one head (k counts from
// the longest, as block_of numbers them; m the sequence's row blocks), the longer first; an odd
// count leaves the middle block alone. Without BALANCE the walk's position is the unit (DYNAMIC:
// the position in lpt_item's order; -1 once it is to come from the counter); with it,
// 2·unit, plus 1 when the unit's second block comes next (the producer runs on PRODUCER_REGS
// registers).
struct Walk {
    int pos;
    int units; // without BALANCE: units of the whole grid
};

__device__ __forceinline__ Walk walk_begin(const FwdParams &p)
{
    if (BALANCE)
        return Walk{2 * (int)blockIdx.x, 0};
    return Walk{(int)blockIdx.x, max_blocks(p) * head_units(p) * p.batch};
}

// The next block's number for block_of, or -1 when the CTA is done.
__device__ __forceinline__ int walk_next(const FwdParams &p, Walk &w)
{
    const int m = max_blocks(p);
    if (DYNAMIC) {
        // The first position is the CTA's own; each later one is taken from the counter when
        // the CTA comes for it (positions gridDim.x on), or without one every gridDim.x-th.
        int *const counter = (int *)p.ws;
        for (;;) {
            const int idx = w.pos >= 0 ? w.pos : (int)gridDim.x + atomicAdd(counter, 1);
            w.pos = counter != nullptr ? -1 : idx + (int)gridDim.x;
            if (idx >= w.units)
                return -1;
            const int item = lpt_item(p, idx, m);
            if (p.cu_seqlens_q == nullptr || item % m < seq_blocks(p, item / m / head_units(p)))
                return item;
        }
    }
    if (!BALANCE) {
        for (;;) {
            const int item = w.pos;
            w.pos += (int)gridDim.x;
            if (item >= w.units)
                return -1;
            if (p.cu_seqlens_q == nullptr || item % m < seq_blocks(p, item / m / head_units(p)))
                return item;
        }
    }
    const int per_head = (m + 1) / 2;
    for (;;) {
        const int unit = w.pos >> 1;
        if (unit >= per_head * head_units(p) * p.batch)
            return -1;
        const int hb = unit / per_head, i = unit % per_head;
        const int mb = p.cu_seqlens_q == nullptr ? m : seq_blocks(p, hb / head_units(p)), partner = mb - 1 - i;
        if (i >= (mb + 1) / 2) { // a unit a shorter sequence does not have
            w.pos = 2 * (unit + (int)gridDim.x);
            continue;
        }
        const bool second = (w.pos & 1) != 0;
        w.pos = !second && partner != i ? w.pos | 1 : 2 * (unit + (int)gridDim.x);
        return hb * m + (second ? partner : i);
    }
}

// ---- the consumer's state and steps ----------------------------------------------------------
// The mbarriers. Per block qi (counted over the CTA's life), alternating between two of each:
// "Q full" (block qi's Q tile has arrived; for a block without keys the producer completes it
// with a plain arrival), "block released" (every consumer thread has computed block qi's last
// S, or written its empty rows: the Q buffer is free, and the consumers are done with the
// blocks before qi). Per ring slot: K full, V full, K empty, V empty.
__device__ __forceinline__ u32 q_full(u32 bars, int qi) { return bars + 8 * (qi & 1); }
__device__ __forceinline__ u32 released(u32 bars, int qi) { return bars + 16 + 8 * (qi & 1); }
__device__ __forceinline__ u32 block_parity(int qi) { return (u32)(qi >> 1) & 1; }
__device__ __forceinline__ u32 k_full(u32 bars, int s) { return bars + 32 + 8 * s; }
__device__ __forceinline__ u32 v_full(u32 bars, int s) { return bars + 32 + 8 * STAGES + 8 * s; }
__device__ __forceinline__ u32 k_empty(u32 bars, int s) { return bars + 32 + 16 * STAGES + 8 * s; }
__device__ __forceinline__ u32 v_empty(u32 bars, int s) { return bars + 32 + 24 * STAGES + 8 * s; }

// After them, NSLOTS slots in which the producer announces the CTA's blocks to the consumers:
// block qi in slot qi % NSLOTS, eight ints (the block's rows, tiles, head and batch, its
// sequence's queries and keys and first query row, and its pack_shift), each slot with its own mbarrier that the producer's
// store completes (release) and the consumers wait on (acquire). The consumers read the fields
// where they need them, so no block state stays in their registers. The producer announces
// block qi once block qi - ANNOUNCE_AHEAD is released, when the consumers are done with block
// qi - ANNOUNCE_AHEAD - 1 and before: so 2 + ANNOUNCE_AHEAD slots are enough.
constexpr int SLOT_Q_FIRST = 0, SLOT_N_TILES = 4, SLOT_HEAD = 8, SLOT_BATCH = 12; // byte offsets
constexpr int SLOT_SQ = 16, SLOT_SK = 20, SLOT_Q0 = 24, SLOT_PACK = 28;
constexpr int ANNOUNCE_AHEAD = LATE_Q ? 2 : Q_BUFS;
static_assert(NSLOTS >= 2 + ANNOUNCE_AHEAD && (NSLOTS & (NSLOTS - 1)) == 0, "slots for the blocks in flight");
__device__ __forceinline__ u32 slot_full(u32 bars, int qi) { return bars + 32 + 32 * STAGES + 8 * (qi % NSLOTS); }
__device__ __forceinline__ u32 slot_parity(int qi) { return (u32)(qi / NSLOTS) & 1; }
__device__ __forceinline__ u32 block_slot(u32 bars, int qi)
{
    return bars + 32 + 32 * STAGES + 8 * NSLOTS + SLOT_BYTES * (qi % NSLOTS);
}

// Ring position r (counted over the CTA's life): slot r % STAGES, in its (r / STAGES)-th use.
__device__ __forceinline__ int slot_of(int r) { return r % STAGES; }
__device__ __forceinline__ u32 parity_of(int r) { return (u32)(r / STAGES) & 1; }

// Shared memory from its 1024-aligned start: the Q buffers, the K ring, the V ring, (PSMEM) the
// P tiles, the barriers.
constexpr u32 K_RING = Q_BUFS * Q_BYTES;
constexpr u32 V_RING = K_RING + STAGES * KV_BYTES;
constexpr u32 BARS = body_bytes(Q_BUFS);
constexpr u32 P_TILES = BARS - P_BYTES;

// A consumer thread's state. Addresses and sizes are derived from `base` and the kernel's
// parameters where they are used rather than held: at d = 256 the accumulators leave the
// warpgroup almost no registers to spare.
struct Consumer {
    u32 base;              // start of shared memory (1024-aligned)
    const FwdParams *prm;
    const TensorMap *to;   // OSTORE: O's tensor map
    int row0;              // first query row of this thread's rows (row0 and row0 + 8)
    int n_tiles;           // of the current block
    int r0;                // ring position of the block's first tile
    int qi;                // the current block, counted over the CTA's life
    u32 qw;                // FT_QW: this warpgroup's rows' offset in a Q buffer (w() · 64 rows)

    // The thread's place, read from %tid.x where used (volatile: not kept in a register).
    __device__ __forceinline__ int tid() const
    {
        int t;
        asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
        return t;
    }
    // Consumer warpgroup 0..NWG-1, broadcast from lane 0: ptxas then knows it is the same in
    // every thread and keeps it, and the descriptors of this warpgroup's Q rows, in uniform
    // registers (from %tid.x directly, every wgmma's descriptors were built in per-thread
    // registers and moved over with R2UR).
    __device__ __forceinline__ int w() const { return __shfl_sync(0xffffffffu, tid() / 128, 0) - 1; }
    __device__ __forceinline__ int warp() const { return tid() / 32 % 4; } // warp inside the warpgroup
    __device__ __forceinline__ int lane() const { return tid() % 32; }

    // This warpgroup's rows of the current block's Q buffer.
    // FT_QW (0 unless the source defines it): the offset w() · 64 rows held from the start
    // (qw) instead of rebuilt from %tid.x where used. Rebuilt, each S's first wgmma waits on a
    // chain of S2R, shifts, SHFL, R2UR and the descriptor's arithmetic, and with EARLY_RESCALE
    // ptxas fills that wait with O's rescale: a trip issues 48 instructions before its first
    // wgmma at d = 256 (95 with EARLY_RESCALE), 52 at d = 128, FlashAttention-4's 21 and 25;
    // held, 38 (46) and 37, no spills, registers as before (FT_DESC64 on, nvcc 13.0,
    // bench/sass_loops.py). Off: trips of the ping-pong defaults grow by 5-15 instructions
    // (bench/defaults_loops.sh), and on an H100 the defaults with it measured 0.977–1.021 of
    // those without per group, inside the noise (bench/results/h100-2026-12-06-macros/).
#if FT_QW
    __device__ __forceinline__ u32 sq() const { return base + (qi % Q_BUFS) * Q_BYTES + qw; }
#else
    __device__ __forceinline__ u32 sq() const { return base + (qi % Q_BUFS) * Q_BYTES + w() * 64 * SWB; }
#endif
    __device__ __forceinline__ u32 sk() const { return base + K_RING; }
    __device__ __forceinline__ u32 sv() const { return base + V_RING; }
    // PSMEM: this warpgroup's P tile.
    __device__ __forceinline__ u32 sp() const { return base + P_TILES + w() * P_WG_BYTES; }
    __device__ __forceinline__ u32 bars() const { return base + BARS; }
    // The current block's sequence, from its slot (shared memory, not registers).
    __device__ __forceinline__ u32 slot() const { return block_slot(bars(), qi); }
    __device__ __forceinline__ int seqlen_k() const { return ld_shared(slot() + SLOT_SK); }
    __device__ __forceinline__ int diag() const { return seqlen_k() - ld_shared(slot() + SLOT_SQ); }
    __device__ __forceinline__ float scale_log2() const { return prm->scale_log2; }
};

// Tile n of the keys (iteration j visits tile n_tiles - 1 - j).
__device__ __forceinline__ int tile_of(const Consumer &c, int j) { return c.n_tiles - 1 - j; }

// This thread's row h (0, 1) among the block's BM: 64 a warpgroup, 16 a warp, 8 apart.
__device__ __forceinline__ int block_row(const Consumer &c, int h)
{
    return c.w() * 64 + c.warp() * 16 + (c.lane() >> 2) + 8 * h;
}

// The pack_shift of the block in a slot (0 without PACK); pack_of: of the consumer's current
// block (read where used, not held: a field more in Consumer changed ptxas's code for PACK = 0).
__device__ __forceinline__ int slot_pack(u32 slot) { return PACK ? ld_shared(slot + SLOT_PACK) : 0; }
__device__ __forceinline__ int pack_of(const Consumer &c) { return slot_pack(c.slot()); }

// The query position of this thread's second row (accumulators with (i >> 1) & 1). PACK: block
// rows r and r + 8 (r = 64·w + 16·warp + g, g < 8) are at positions (r >> s) and (r >> s) +
// (8 >> s) for every s up to 6: below 16 rows a position the 8 rows between step 8 >> s
// positions, and from 16 on r's offset in its run of 2^s rows is below 2^s − 8.
__device__ __forceinline__ int row_b(const Consumer &c)
{
    if (!PACK)
        return c.row0 + 8;
    return c.row0 + (8 >> pack_of(c));
}

// The first query position of this thread's warpgroup's rows, and one past its last. PACK: the
// warpgroup's first block row 64·w is a multiple of 2^s, so its position is row0's less
// (16·warp + g) >> s, and its 64 rows span 64 >> s positions.
__device__ __forceinline__ int wg_first(const Consumer &c)
{
    if (!PACK)
        return c.row0 - c.warp() * 16 - (c.lane() >> 2);
    return c.row0 - ((c.warp() * 16 + (c.lane() >> 2)) >> pack_of(c));
}
__device__ __forceinline__ int wg_end(const Consumer &c)
{
    if (!PACK)
        return wg_first(c) + 64;
    return wg_first(c) + (64 >> pack_of(c));
}

// Whether some score of this warpgroup's rows in tile n must be masked.
__device__ __forceinline__ bool needs_mask(const Consumer &c, int n)
{
    const int end = (n + 1) * BN;
    if (end > c.seqlen_k())
        return true;
    return CAUSAL && end - 1 > wg_first(c) + c.diag();
}

// Whether this warpgroup's rows see none of tile n's keys past its first NARROW (see NARROW).
// The same for every thread of the warpgroup, as its wgmmas need.
__device__ __forceinline__ bool narrow(const Consumer &c, int n)
{
    if (!USE_NARROW)
        return false;
    const int key_end = min(wg_end(c) + c.diag(), c.seqlen_k()); // past the last row's last key
    return key_end - n * BN <= NARROW;
}

__device__ __forceinline__ void issue_s(const Consumer &c, int s, float (&acc)[SN])
{
    const u32 q_tile = c.sq(), k_tile = c.sk() + s * KV_BYTES;
#pragma unroll
    for (int kk = 0; kk < DK / 16; ++kk)
        ft_wgmma_s(acc, kmajor_desc(q_tile, BM, kk), kmajor_desc(k_tile, BN, kk), kk > 0);
}

// O += P·V over the first KEYS keys of ring slot s (BN, or NARROW after a narrow softmax); P
// from registers, or (PSMEM) from this warpgroup's P tile.
template <int KEYS>
__device__ __forceinline__ void issue_o(const Consumer &c, int s, float (&o)[ON], const u32 (&p)[PN])
{
    const u32 v_tile = c.sv() + s * KV_BYTES;
#pragma unroll
    for (int kb = 0; kb < KEYS / 16; ++kb) {
#if FTP_PSMEM
        ft_wgmma_op(o, p_desc(c.sp(), kb), v_desc(v_tile, kb), 1);
#else
        ft_wgmma_o(o, p[4 * kb], p[4 * kb + 1], p[4 * kb + 2], p[4 * kb + 3], v_desc(v_tile, kb));
#endif
    }
}

// Scores outside the keys or above the causal diagonal become -inf. Accumulator i of the
// thread holds row row0 + 8·((i >> 1) & 1), column 8·(i >> 2) + 2·(lane & 3) + (i & 1); only
// the first NS accumulators are taken (SN, or SNN where the rest are masked anyway).
template <int NS> __device__ __forceinline__ void apply_mask(const Consumer &c, int n, float (&acc)[SN])
{
    const int col0 = n * BN + 2 * (c.lane() & 3);
    // One past the last key that each of the thread's two rows sees (the end of its sequence's
    // keys, or the causal diagonal): two registers over the loop.
    int limit[2];
    {
        const int seqlen_k = c.seqlen_k(), diag = c.diag();
        limit[0] = CAUSAL ? min(seqlen_k, c.row0 + diag + 1) : seqlen_k;
        limit[1] = CAUSAL ? min(seqlen_k, row_b(c) + diag + 1) : seqlen_k;
    }
#pragma unroll
    for (int i = 0; i < NS; ++i) {
        const int col = col0 + 8 * (i >> 2) + (i & 1);
        if (col >= limit[(i >> 1) & 1])
            acc[i] = NEG_INF;
    }
}

// Online softmax of one tile's first NS scores (the others are masked): new row maxima, the
// factor that rescales the previous state, and the exponentials in place of the scores (fp32):
// of every 8 accumulators, the first PEXP by FMA (ft_exp2_poly), the others by MUFU.EX2.
// SKIP_RESCALE: a row whose maximum did not change takes the factor 1 exactly (not ex2(0)),
// so that O's rescale can be left out where every row of a warp has it (step). Past the first
// few tiles a row's maximum seldom changes (in a tile of random scores with probability about
// 1 / the tiles seen), and at d = 256 the rescale is 128 multiplications a thread a tile.
template <int NS>
__device__ __forceinline__ void softmax_step(const Consumer &c, float (&acc)[SN], float (&m)[2], float (&l)[2],
                                             float (&alpha)[2])
{
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int i = 0; i < NS; ++i)
        mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], acc[i]);
    float mc[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = quad_max(mx[h]);
        mc[h] = row_offset(mx[h], c.scale_log2());
        if (SKIP_RESCALE)
            alpha[h] = mx[h] == m[h] ? 1.f : ex2(m[h] * c.scale_log2() - mc[h]);
        else
            alpha[h] = ex2(m[h] * c.scale_log2() - mc[h]);
        m[h] = mx[h];
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < NS; ++i) {
        const int h = (i >> 1) & 1;
        const float x = fmaf(acc[i], c.scale_log2(), -mc[h]);
        acc[i] = (i & 7) < PEXP ? ft_exp2_poly(x) : ex2(x);
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
// registers of k-block kb (the same correspondence as mma.sync's C and A fragments). Only the
// first NS accumulators are taken (see softmax_of); the rest of P is set to 0 rather than left
// holding an older P that the compiler would have to keep.
template <int NS> __device__ __forceinline__ void pack_p(const float (&acc)[SN], u32 (&p)[BN / 4])
{
#pragma unroll
    for (int i = 0; i < BN / 4; ++i)
        p[i] = i < NS / 2 ? pack2(acc[2 * i], acc[2 * i + 1]) : 0u;
}

// PSMEM: P's first NS accumulators (the keys P·V reads: NS/8 k16 steps) packed as pack_p does
// and stored into this warpgroup's P tile with stmatrix, four 8×8 matrices per k16 step: the
// registers of step kb are the A fragments (rows g and g + 8, keys 16·kb + 2·t and + 8), so lane
// l gives the address of row 16·warp + l % 8 + 8·((l >> 3) & 1), keys 16·kb + 8·(l >> 4). A
// row's 16-byte chunks are swizzled as TMA's SWIZZLE_{PSWB}B writes them (chunk bits 4.. XOR
// address bits 7..; the tile starts on a 1024-byte boundary). Then the proxy fence (the wgmma
// reads through the async proxy) and the warpgroup's barrier: its P·V reads every thread's part.
// The byte offset, in a tile of column blocks of ROWS rows of SPAN bytes swizzled as TMA's
// SWIZZLE_{SPAN}B writes them (from a 1024-byte boundary), of the address lane l of warp wp (in
// its warpgroup) gives stmatrix for step kb of 16 columns: row 16·wp + l % 8 + 8·((l >> 3) & 1),
// columns 16·kb + 8·(l >> 4). (The caller reads the lane and warp once: Consumer's are volatile.)
template <int SPAN, int ROWS> __device__ __forceinline__ u32 stmatrix_offset(int wp, int l, int kb)
{
    constexpr int COLS = SPAN / 2; // 16-bit elements per swizzled row of a column block
    const u32 row_bytes = (u32)((wp * 16 + (l & 7) + 8 * ((l >> 3) & 1)) * SPAN);
    const u32 swz = (row_bytes >> 3) & ((SPAN / 16 - 1) << 4); // the row's XOR of chunk bits
    const int col = 16 * kb + 8 * (l >> 4);
    return (u32)((col / COLS) * ROWS * SPAN) + row_bytes + (((u32)(col % COLS) * 2) ^ swz);
}

template <int NS> __device__ __forceinline__ void store_p(const Consumer &c, const float (&acc)[SN])
{
    const u32 tile = c.sp();
    const int l = c.lane(), wp = c.warp();
#pragma unroll
    for (int kb = 0; kb < NS / 8; ++kb)
        stmatrix_x4(tile + stmatrix_offset<PSWB, 64>(wp, l, kb), pack2(acc[8 * kb], acc[8 * kb + 1]),
                    pack2(acc[8 * kb + 2], acc[8 * kb + 3]), pack2(acc[8 * kb + 4], acc[8 * kb + 5]),
                    pack2(acc[8 * kb + 6], acc[8 * kb + 7]));
    fence_proxy_async();
    named_sync(BAR_WG + c.w(), 128);
}

// P_j for the next P·V: packed in registers, or (PSMEM) stored in the P tile.
template <int NS> __device__ __forceinline__ void make_p(const Consumer &c, const float (&acc)[SN], u32 (&p)[PN])
{
#if FTP_PSMEM
    store_p<NS>(c, acc);
#else
    pack_p<NS>(acc, p);
#endif
}

// The softmax of S_j, all of it or (NARROW_S: the rest is masked) its first SNN accumulators;
// the mask first where tile j needs one.
template <bool MASK, bool NARROW_S>
__device__ __forceinline__ void softmax_of(const Consumer &c, int j, float (&acc)[SN], float (&m)[2], float (&l)[2],
                                           float (&alpha)[2])
{
    constexpr int NS = NARROW_S ? SNN : SN;
    if (MASK)
        apply_mask<NS>(c, tile_of(c, j), acc);
    softmax_step<NS>(c, acc, m, l, alpha);
}

__device__ __forceinline__ void turn_begin(const Consumer &c)
{
    if (PINGPONG)
        named_sync(turn_bar(c.w()), 256);
}

__device__ __forceinline__ void turn_end(const Consumer &c)
{
    if (PINGPONG)
        named_arrive(turn_bar(next_turn(c.w())), 256);
}

// O *= the rows' factors: all of it, or (SKIP_RESCALE) in warps where some row's factor is not
// 1 (a warp vote, so that ptxas knows the branch is uniform).
__device__ __forceinline__ void rescale(float (&o)[ON], const float (&alpha)[2])
{
    if (!SKIP_RESCALE || __any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f))
        rescale_o(o, alpha);
}

// Iteration j >= 1: S_j and O += P_{j-1}·V_{j-1}, the softmax of S_j; K slot j and V slot
// j-1 released as soon as their wgmmas are done. NARROW_P: P_{j-1} covers NARROW keys (see
// NARROW). Every wgmma is complete when a step returns: callers may choose between steps at
// run time (ptxas serialises wgmmas whose results are still in flight where two paths meet).
// alpha: the factors of S_j's softmax on return; EARLY_RESCALE takes those of S_{j-1} in it
// (1 after the first tile: O is still 0) and rescales O by them before P_{j-1}·V_{j-1}.
template <bool MASK, bool NARROW_P = false>
__device__ __forceinline__ void step(const Consumer &c, int j, float (&o)[ON], u32 (&p)[PN], float (&m)[2],
                                     float (&l)[2], float (&alpha)[2])
{
    const int r = c.r0 + j, s = slot_of(r), prev = slot_of(r - 1);
    const bool leader = c.lane() == 0; // arrives for its warp
    float acc[SN];

    mbar_wait(k_full(c.bars(), s), parity_of(r));
    mbar_wait(v_full(c.bars(), prev), parity_of(r - 1));
    turn_begin(c);
    wgmma_fence();
    issue_s(c, s, acc);
    wgmma_commit();
    if (EARLY_RESCALE) { // while the tensor cores compute S_j
        rescale(o, alpha);
        wgmma_fence();
    }
    fence_regs(o);
    fence_regs(p);
    issue_o<NARROW_P ? NARROW : BN>(c, prev, o, p);
    wgmma_commit();
    turn_end(c);
    if (OVERLAP) {
        wgmma_wait<1>();
        fence_regs(acc);
        if (leader)
            mbar_arrive(k_empty(c.bars(), s));
        softmax_of<MASK, false>(c, j, acc, m, l, alpha);
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(p);
    } else {
        wgmma_wait<0>();
        fence_regs(acc);
        fence_regs(o);
        fence_regs(p);
        if (leader)
            mbar_arrive(k_empty(c.bars(), s));
        softmax_of<MASK, false>(c, j, acc, m, l, alpha);
    }
    if (leader)
        mbar_arrive(v_empty(c.bars(), prev));
    if (!EARLY_RESCALE) // (every wgmma is complete here, none in flight across the vote)
        rescale(o, alpha);
    make_p<SN>(c, acc, p);
}

// Iteration 0: S_0 and its softmax (nothing to rescale yet), complete on return like step;
// NARROW_S: the softmax of its first NARROW keys only.
template <bool NARROW_S>
__device__ __forceinline__ void first_step(const Consumer &c, u32 (&p)[PN], float (&m)[2], float (&l)[2])
{
    float acc[SN];
    float alpha[2];
    mbar_wait(k_full(c.bars(), slot_of(c.r0)), parity_of(c.r0));
    turn_begin(c);
    wgmma_fence();
    issue_s(c, slot_of(c.r0), acc);
    wgmma_commit();
    turn_end(c);
    wgmma_wait<0>();
    fence_regs(acc);
    if (c.lane() == 0)
        mbar_arrive(k_empty(c.bars(), slot_of(c.r0)));
    if (__all_sync(0xffffffffu, needs_mask(c, tile_of(c, 0))))
        softmax_of<true, NARROW_S>(c, 0, acc, m, l, alpha);
    else
        softmax_of<false, NARROW_S>(c, 0, acc, m, l, alpha);
    make_p<NARROW_S ? SNN : SN>(c, acc, p);
}

// The block's last P·V, complete on return (EARLY_RESCALE: O rescaled by the last softmax's
// factors, alpha, first).
template <bool NARROW_P>
__device__ __forceinline__ void last_step(const Consumer &c, float (&o)[ON], u32 (&p)[PN], const float (&alpha)[2])
{
    const int last = c.r0 + c.n_tiles - 1;
    if (EARLY_RESCALE)
        rescale(o, alpha);
    mbar_wait(v_full(c.bars(), slot_of(last)), parity_of(last));
    turn_begin(c);
    wgmma_fence();
    fence_regs(o);
    fence_regs(p);
    issue_o<NARROW_P ? NARROW : BN>(c, slot_of(last), o, p);
    wgmma_commit();
    turn_end(c);
    wgmma_wait<0>();
    fence_regs(o);
    if (c.lane() == 0)
        mbar_arrive(v_empty(c.bars(), slot_of(last)));
}

// The end of the thread's rows: each row's factor 1/l (0 for a row that saw no key) into inv,
// and for a row inside the sequence its LSE and, with STORE, its O from registers (each quad of
// threads writes 16 contiguous bytes of a row). PACK: head is the block's first; a row's own is
// head + its block row's low `pack` bits (pack_shift).
template <bool STORE>
__device__ __forceinline__ void finish_rows(const Consumer &c, const FwdParams &prm, const float (&o)[ON],
                                            const float (&m)[2], const float (&l)[2], int batch, int head,
                                            int pack, const Seq &seq, float (&inv)[2])
{
    const int t = c.lane() & 3;
    u16 *out = (u16 *)prm.o + seq.o_offset(prm, batch) + head * prm.o_head_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float lsum = quad_sum(l[h]);
        inv[h] = lsum > 0.f ? 1.f / lsum : 0.f;
        const int row = PACK ? (h == 0 ? c.row0 : row_b(c)) : c.row0 + 8 * h; // (as written, PACK = 0's code is as before it)
        if (row >= seq.sq)
            continue;
        const int dh = PACK ? block_row(c, h) & ((1 << pack) - 1) : 0; // the row's head past `head`
        if (prm.lse != nullptr && t == 0)
            prm.lse[seq.lse_index(prm, batch, head + dh, row)] = row_lse(m[h], lsum, c.scale_log2());
        if (!STORE)
            continue;
        u16 *orow = (PACK ? out + dh * prm.o_head_stride : out) + (long long)row * prm.o_row_stride + 2 * t;
#pragma unroll
        for (int nb = 0; nb < D / 8; ++nb)
            *(u32 *)(orow + 8 * nb) = pack2(o[4 * nb + 2 * h] * inv[h], o[4 * nb + 2 * h + 1] * inv[h]);
    }
}

// OSTORE: the warpgroup's 64 rows of O into its rows of the block's Q buffer, then one thread
// stores them with TMA at (row, head, batch) of O's map and waits until the store has read
// them (the caller then releases the buffer). PACK with pack > 0: O's map is (element, head,
// position, batch), its box the group's heads by 64 >> pack positions, at (head, row, batch). The layout is the Q tile's (kmajor_desc): column
// blocks of CH columns, BM rows apart, rows of SWB bytes whose 16-byte chunks are swizzled as
// TMA's SWIZZLE_{SWB}B (stmatrix_offset); the stmatrix registers are store_p's.
// Columns past D are zeros that the map's extent leaves unwritten.
__device__ __forceinline__ void store_o(const Consumer &c, const float (&o)[ON], const float (&inv)[2], int batch,
                                        int head, int row, int pack)
{
    const u32 tile = c.sq();
    const int l = c.lane(), wp = c.warp();
#pragma unroll
    for (int kb = 0; kb < DK / 16; ++kb)
        stmatrix_x4(tile + stmatrix_offset<SWB, BM>(wp, l, kb), pack2(o[8 * kb] * inv[0], o[8 * kb + 1] * inv[0]),
                    pack2(o[8 * kb + 2] * inv[1], o[8 * kb + 3] * inv[1]),
                    pack2(o[8 * kb + 4] * inv[0], o[8 * kb + 5] * inv[0]),
                    pack2(o[8 * kb + 6] * inv[1], o[8 * kb + 7] * inv[1]));
    fence_proxy_async();
    named_sync(BAR_WG + c.w(), 128);
    if (wp == 0 && l == 0) {
#pragma unroll
        for (int b = 0; b < NCB; ++b) {
            if (PACK && pack > 0)
                tma_store(c.to, tile + b * BM * SWB, b * CH, head, row, batch);
            else
                tma_store(c.to, tile + b * BM * SWB, b * CH, row, head, batch);
        }
        bulk_commit();
        bulk_wait_read<0>();
    }
}

// The sequence of the block in a slot, as far as the consumers need it (its queries and keys
// and its first query row).
__device__ __forceinline__ Seq slot_seq(u32 slot)
{
    Seq s;
    s.sq = ld_shared(slot + SLOT_SQ), s.sk = ld_shared(slot + SLOT_SK), s.q0 = ld_shared(slot + SLOT_Q0), s.k0 = 0;
    return s;
}

__device__ __forceinline__ void finish(const Consumer &c, const FwdParams &prm, u32 slot, const float (&o)[ON],
                                       const float (&m)[2], const float (&l)[2]);

// Iterations 1 .. n_tiles - 1 of a block: the narrow P·V first after a narrow first tile
// (masked or not: one path is enough), then the tiles that need a mask, then the rest.
__device__ __forceinline__ void steps(const Consumer &c, bool narrow_first, float (&o)[ON], u32 (&p)[PN],
                                      float (&m)[2], float (&l)[2], float (&alpha)[2])
{
    int j = 1;
    if (narrow_first && j < c.n_tiles)
        step<true, true>(c, j++, o, p, m, l, alpha);
    for (; j < c.n_tiles && __all_sync(0xffffffffu, needs_mask(c, tile_of(c, j))); ++j)
        step<true>(c, j, o, p, m, l, alpha);
    for (; j < c.n_tiles; ++j)
        step<false>(c, j, o, p, m, l, alpha);
}

// One block of rows for this consumer warpgroup, whose Q tile has arrived.
__device__ __forceinline__ void consume(const Consumer &c, const FwdParams &prm, u32 slot)
{
    float o[ON];
    u32 p[PN]; // PSMEM: unused (P is in the P tile)
    if (PSMEM)
        p[0] = 0u;
    float m[2] = {NEG_INF, NEG_INF};
    float l[2] = {0.f, 0.f};
    float alpha[2] = {1.f, 1.f}; // the last softmax's factors (see step)

#pragma unroll
    for (int i = 0; i < ON; ++i)
        o[i] = 0.f;

    // Tiles from the last to the first: the first one narrow where it can be, then the tiles
    // that need a mask, then the rest. Both choices are the same in every thread of the
    // warpgroup; taken by a warp vote, ptxas knows it, counts the branches as uniform and keeps
    // the wgmma descriptors in uniform registers (else every wgmma's were built per thread and
    // moved over with R2UR; first_step likewise).
    // (Without causal masking the narrow choice is the constant false, not a vote: the narrow
    // paths are then not compiled at all.)
    const bool narrow_first = USE_NARROW && __all_sync(0xffffffffu, narrow(c, tile_of(c, 0)));
    if (narrow_first)
        first_step<true>(c, p, m, l);
    else
        first_step<false>(c, p, m, l);
    steps(c, narrow_first, o, p, m, l, alpha);
    // Every S of the block is done: the next Q may come. Each thread arrives, releasing its own
    // reads of the block slots. (OSTORE: after O has left through the Q buffer, below.)
    if (!OSTORE)
        mbar_arrive(released(c.bars(), c.qi));

    // The last P·V, narrow after a narrow first tile that was the only one.
    if (narrow_first && c.n_tiles == 1)
        last_step<true>(c, o, p, alpha);
    else
        last_step<false>(c, o, p, alpha);
    finish(c, prm, slot, o, m, l);
}

// The end of a block whose last P·V is done: normalise, write the LSE and O (OSTORE: then
// release the block).
__device__ __forceinline__ void finish(const Consumer &c, const FwdParams &prm, u32 slot, const float (&o)[ON],
                                       const float (&m)[2], const float (&l)[2])
{
    const int batch = ld_shared(slot + SLOT_BATCH), head = ld_shared(slot + SLOT_HEAD);
    const int pack = slot_pack(slot);
    const Seq seq = slot_seq(slot);
    float inv[2];
    if (!OSTORE) {
        finish_rows<true>(c, prm, o, m, l, batch, head, pack, seq, inv);
        return;
    }
    // The warpgroup's rows, from its first: all inside the sequence, or a dense tensor whose map
    // ends where the sequence does (the same in every thread of the warpgroup). (PACK: its first
    // position; a packed block's batch is dense.)
    const int first = ld_shared(slot + SLOT_Q_FIRST) + ((64 * c.w()) >> pack);
    if (prm.cu_seqlens_q == nullptr || first + 64 <= seq.sq) {
        finish_rows<false>(c, prm, o, m, l, batch, head, pack, seq, inv);
        store_o(c, o, inv, prm.cu_seqlens_q != nullptr ? 0 : batch, head, seq.q0 + first, pack);
    } else {
        finish_rows<true>(c, prm, o, m, l, batch, head, pack, seq, inv);
    }
    mbar_arrive(released(c.bars(), c.qi));
}

// ---- CHAIN: a block's last P·V with the next block's first S -----------------------------------
// The consumer thread's state between blocks: the pending block's O, P (of its last tile), row
// statistics and last factors, and which block it is (qi < 0: none pending) with its rows.
struct Chain {
    float o[ON];
    u32 p[PN];
    float m[2], l[2], alpha[2];
    int qi, row0;
};

// The pending block as a Consumer: its block number and rows, and its last tile at ring position
// c.r0 - 1 (r0 and n_tiles such that last_step finds it there).
__device__ __forceinline__ Consumer pending_of(const Consumer &c, const Chain &ch)
{
    Consumer cp = c;
    cp.qi = ch.qi, cp.row0 = ch.row0, cp.r0 = c.r0 - 1, cp.n_tiles = 1;
    return cp;
}

// Iteration 0 of block c with the pending block's last P·V (its V at ring position c.r0 - 1):
// S_0 and that P·V issued together (EARLY_RESCALE: the pending O rescaled by its last factors
// between them), S_0's softmax while P·V runs, into m and l (the new block's); complete on
// return like step, P_0 made in ch.p. S_0's mask is applied whether or not the tile needs one
// (a vote with P·V in flight would join two paths: ptxas serialises the wgmmas there).
template <bool NARROW_S>
__device__ __forceinline__ void first_step_chained(const Consumer &c, Chain &ch, float (&m)[2], float (&l)[2])
{
    const int r = c.r0, s = slot_of(r), prev = slot_of(r - 1);
    const bool leader = c.lane() == 0;
    float acc[SN];
    float alpha[2];

    mbar_wait(k_full(c.bars(), s), parity_of(r));
    mbar_wait(v_full(c.bars(), prev), parity_of(r - 1));
    wgmma_fence();
    issue_s(c, s, acc);
    wgmma_commit();
    if (EARLY_RESCALE) {
        rescale(ch.o, ch.alpha);
        wgmma_fence();
    }
    fence_regs(ch.o);
    fence_regs(ch.p);
    issue_o<BN>(c, prev, ch.o, ch.p);
    wgmma_commit();
    wgmma_wait<1>();
    fence_regs(acc);
    if (leader)
        mbar_arrive(k_empty(c.bars(), s));
    softmax_of<true, NARROW_S>(c, 0, acc, m, l, alpha);
    wgmma_wait<0>();
    fence_regs(ch.o);
    fence_regs(ch.p);
    if (leader)
        mbar_arrive(v_empty(c.bars(), prev));
    make_p<NARROW_S ? SNN : SN>(c, acc, ch.p);
}

// The pending block's last P·V alone, then its end; none pending after.
__device__ __forceinline__ void drain(const Consumer &c, const FwdParams &prm, Chain &ch)
{
    if (ch.qi < 0)
        return;
    const Consumer cp = pending_of(c, ch);
    last_step<false>(cp, ch.o, ch.p, ch.alpha);
    finish(cp, prm, cp.slot(), ch.o, ch.m, ch.l);
    ch.qi = -1;
}

// One block of rows for this consumer warpgroup, whose Q tile has arrived, chained: its first S
// with the pending block's last P·V (which then ends), its own last P·V left pending, unless it
// is narrow (a narrow first tile that was the only one: it runs at once).
__device__ __forceinline__ void consume_chained(const Consumer &c, const FwdParams &prm, u32 slot, Chain &ch)
{
    float m[2] = {NEG_INF, NEG_INF};
    float l[2] = {0.f, 0.f};

    // (the choices as in consume)
    const bool narrow_first = USE_NARROW && __all_sync(0xffffffffu, narrow(c, tile_of(c, 0)));
    if (ch.qi >= 0) {
        if (narrow_first)
            first_step_chained<true>(c, ch, m, l);
        else
            first_step_chained<false>(c, ch, m, l);
        const Consumer cp = pending_of(c, ch);
        finish(cp, prm, cp.slot(), ch.o, ch.m, ch.l);
    } else if (narrow_first) {
        first_step<true>(c, ch.p, m, l);
    } else {
        first_step<false>(c, ch.p, m, l);
    }
#pragma unroll
    for (int i = 0; i < ON; ++i)
        ch.o[i] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h)
        ch.m[h] = m[h], ch.l[h] = l[h], ch.alpha[h] = 1.f;
    steps(c, narrow_first, ch.o, ch.p, ch.m, ch.l, ch.alpha);
    if (!OSTORE)
        mbar_arrive(released(c.bars(), c.qi));
    if (narrow_first && c.n_tiles == 1) {
        last_step<true>(c, ch.o, ch.p, ch.alpha);
        finish(c, prm, slot, ch.o, ch.m, ch.l);
        ch.qi = -1;
    } else {
        ch.qi = c.qi, ch.row0 = c.row0;
    }
}

// A block whose rows see no key: O = 0 and LSE = +inf for this warpgroup's 64 rows.
__device__ __forceinline__ void write_empty(const FwdParams &p, u32 slot, int w, int tid)
{
    if (const int pack = slot_pack(slot)) {
        // Row r of the 64: block row 64·w + r, at position q_first + (that >> pack), head head +
        // its low `pack` bits.
        const Seq seq = slot_seq(slot);
        const int q_first = ld_shared(slot + SLOT_Q_FIRST);
        const int batch = ld_shared(slot + SLOT_BATCH), head = ld_shared(slot + SLOT_HEAD);
        u16 *o = (u16 *)p.o + seq.o_offset(p, batch);
        for (int idx = tid; idx < 64 * (D / 8); idx += 128) {
            const int br = 64 * w + idx / (D / 8), row = q_first + (br >> pack), col = (idx % (D / 8)) * 8;
            const int hd = head + (br & ((1 << pack) - 1));
            if (row < seq.sq)
                *(uint4 *)(o + hd * p.o_head_stride + (long long)row * p.o_row_stride + col) = make_uint4(0, 0, 0, 0);
        }
        if (p.lse != nullptr)
            for (int r = tid; r < 64; r += 128) {
                const int br = 64 * w + r, row = q_first + (br >> pack);
                if (row < seq.sq)
                    p.lse[seq.lse_index(p, batch, head + (br & ((1 << pack) - 1)), row)] = POS_INF;
            }
        return;
    }
    const Seq seq = slot_seq(slot);
    const int first = ld_shared(slot + SLOT_Q_FIRST) + 64 * w, rows = min(64, seq.sq - first);
    const int batch = ld_shared(slot + SLOT_BATCH), head = ld_shared(slot + SLOT_HEAD);
    u16 *o = (u16 *)p.o + seq.o_offset(p, batch) + head * p.o_head_stride;
    for (int idx = tid; idx < rows * (D / 8); idx += 128) {
        const int row = first + idx / (D / 8), col = (idx % (D / 8)) * 8;
        *(uint4 *)(o + (long long)row * p.o_row_stride + col) = make_uint4(0, 0, 0, 0);
    }
    if (p.lse != nullptr)
        for (int row = tid; row < rows; row += 128)
            p.lse[seq.lse_index(p, batch, head, first + row)] = POS_INF;
}

// ---- the producer -------------------------------------------------------------------------------
// One K/V tile (its first key row krow) into the ring at position r, once the consumers have
// emptied the slot's last use. (K's and V's halves are written out: folded into one helper
// called twice, ptxas orders the producer's code differently, and these kernels' machine code
// is kept as the GPU verified it.)
__device__ __forceinline__ void load_kv(u32 sk, u32 sv, u32 bars, const TensorMap *tk, const TensorMap *tv, int r,
                                        int krow, int kv_head, int k_batch)
{
    const int s = slot_of(r);
    if (r >= STAGES)
        mbar_wait(k_empty(bars, s), parity_of(r - STAGES));
    mbar_expect_tx(k_full(bars, s), KV_BYTES);
#pragma unroll
    for (int b = 0; b < NCB; ++b)
        tma_load(sk + s * KV_BYTES + b * BN * SWB, tk, b * CH, krow, kv_head, k_batch, k_full(bars, s));
    if (r >= STAGES)
        mbar_wait(v_empty(bars, s), parity_of(r - STAGES));
    mbar_expect_tx(v_full(bars, s), KV_BYTES);
#pragma unroll
    for (int b = 0; b < NCB; ++b)
        tma_load(sv + s * KV_BYTES + b * BN * SWB, tv, b * CH, krow, kv_head, k_batch, v_full(bars, s));
}

__device__ __forceinline__ void produce(const FwdParams &p, u32 sq, u32 sk, u32 sv, u32 bars, const TensorMap *tq,
                                        const TensorMap *tk, const TensorMap *tv)
{
    int r = 0; // ring position
    Walk walk = walk_begin(p);
    // Each block qi, and the end (n_tiles -1), is announced in its slot once the consumers have
    // released block qi - ANNOUNCE_AHEAD: without LATE_Q that frees the Q buffer block qi takes,
    // and so the slots of the blocks before it (see NSLOTS); LATE_Q waits for block qi - 1's
    // release (its O store) only after block qi's first K/V tile, before its Q.
    // (The producer runs on PRODUCER_REGS registers: it waits before it works out the block, so
    // that little is live across the wait.)
    for (int qi = 0;; ++qi) {
        if (qi >= ANNOUNCE_AHEAD)
            mbar_wait(released(bars, qi - ANNOUNCE_AHEAD), block_parity(qi - ANNOUNCE_AHEAD));
        const int item = walk_next(p, walk);
        if (item < 0) {
            st_shared4(block_slot(bars, qi), 0, -1, 0, 0);
            mbar_arrive(slot_full(bars, qi));
            return;
        }
        const Block blk = block_of(p, item);
        st_shared4(block_slot(bars, qi) + SLOT_SQ, blk.sq, blk.sk, blk.q0, blk.pack); // (0 without PACK)
        st_shared4(block_slot(bars, qi), blk.q_first, blk.n_tiles, blk.head, blk.batch);
        mbar_arrive(slot_full(bars, qi));
        if (blk.n_tiles == 0) {
            mbar_arrive(q_full(bars, qi)); // nothing to load: the phase completes as it is
            continue;
        }
        // The K/V tiles go from the last to the first (krow: the tile's first key row in the
        // tensor; packed keys are one batch); LATE_Q loads the first of them before the Q tile.
        if (LATE_Q) {
            load_kv(sk, sv, bars, tk, tv, r, blk.k0 + (blk.n_tiles - 1) * BN, blk.kv_head,
                    p.cu_seqlens_k != nullptr ? 0 : blk.batch);
            ++r;
            if (qi >= 1)
                mbar_wait(released(bars, qi - 1), block_parity(qi - 1));
        }
        const u32 q_buf = sq + (qi % Q_BUFS) * Q_BYTES;
        mbar_expect_tx(q_full(bars, qi), Q_BYTES);
        // (PACK with pack > 0: Q's map is (element, head, position, batch), its box the group's
        // heads by BM >> pack positions: block row r is position r >> pack, head r's low bits.)
#pragma unroll
        for (int b = 0; b < NCB; ++b) {
            if (PACK && blk.pack > 0)
                tma_load(q_buf + b * BM * SWB, tq, b * CH, blk.head, blk.q_first, blk.batch, q_full(bars, qi));
            else
                tma_load(q_buf + b * BM * SWB, tq, b * CH, blk.q0 + blk.q_first, blk.head,
                         p.cu_seqlens_q != nullptr ? 0 : blk.batch, q_full(bars, qi));
        }
        const int k_batch = p.cu_seqlens_k != nullptr ? 0 : blk.batch;
        for (int left = blk.n_tiles - LATE_Q, krow = blk.k0 + (blk.n_tiles - 1 - LATE_Q) * BN; left > 0;
             --left, krow -= BN, ++r)
            load_kv(sk, sv, bars, tk, tv, r, krow, blk.kv_head, k_batch);
    }
}

__device__ __forceinline__ void flash_fwd(const FwdParams &p, const TensorMap *tq, const TensorMap *tk,
                                          const TensorMap *tv, const TensorMap *to)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    const int tid = (int)threadIdx.x;
    const u32 raw = smem_addr(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u; // swizzle patterns start on 1024-byte boundaries
    const u32 sq = base, sk = base + K_RING, sv = base + V_RING, bars = base + BARS;

    if (tid == 0) {
        for (int i = 0; i < 2; ++i) {
            mbar_init(q_full(bars, i), 1);
            mbar_init(released(bars, i), NWG * 128); // one arrival per consumer thread
        }
        for (int i = 0; i < NSLOTS; ++i)
            mbar_init(slot_full(bars, i), 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(k_full(bars, s), 1);
            mbar_init(v_full(bars, s), 1);
            mbar_init(k_empty(bars, s), NWG * 4);
            mbar_init(v_empty(bars, s), NWG * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    const int wg = tid / 128;
    if (wg == 0) {
        if (SHARE_REGS)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (tid == 0)
            produce(p, sq, sk, sv, bars, tq, tk, tv);
        return;
    }
    if (SHARE_REGS)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));

    Consumer c;
    c.base = base;
    c.prm = &p;
    c.to = to;
    c.r0 = 0;
    c.qw = FT_QW ? (u32)c.w() * 64 * SWB : 0u;
    // Ping-pong: the turns go round across blocks (every warpgroup takes n_tiles + 1 turns per
    // block); consumer 0 takes the first, and at the end takes the last one's last hand-over.
    if (PINGPONG && c.w() == NWG - 1)
        named_arrive(turn_bar(0), 256);
    Chain ch; // CHAIN: the block whose last P·V is pending
    ch.qi = -1;
    if (PSMEM)
        ch.p[0] = 0u;
    // The blocks come from the producer (see produce).
    for (c.qi = 0;; ++c.qi) {
        mbar_wait(slot_full(c.bars(), c.qi), slot_parity(c.qi));
        const u32 slot = block_slot(c.bars(), c.qi);
        c.n_tiles = ld_shared(slot + SLOT_N_TILES);
        if (c.n_tiles < 0) {
            if (CHAIN)
                drain(c, p, ch);
            break;
        }
        if (c.n_tiles == 0) {
            if (CHAIN)
                drain(c, p, ch);
            write_empty(p, slot, c.w(), tid % 128);
            mbar_arrive(released(c.bars(), c.qi));
            continue;
        }
        if (PACK) // the position of the thread's first row (row_b: its second's)
            c.row0 = ld_shared(slot + SLOT_Q_FIRST) + (block_row(c, 0) >> slot_pack(slot));
        else
            c.row0 = ld_shared(slot + SLOT_Q_FIRST) + c.w() * 64 + c.warp() * 16 + (c.lane() >> 2);
        mbar_wait(q_full(c.bars(), c.qi), block_parity(c.qi));
        if (CHAIN)
            consume_chained(c, p, slot, ch);
        else
            consume(c, p, slot);
        c.r0 += c.n_tiles;
    }
    if (PINGPONG && c.w() == 0)
        named_sync(turn_bar(0), 256);
    if (OSTORE && c.warp() == 0 && c.lane() == 0)
        bulk_wait_all(); // the last block's stores written before the CTA ends
}

} // namespace ft

// The generated entry point: FT_DEFINE_KERNEL(name) at the end of each generated source. With
// OSTORE it takes O's map too (the runtime encodes it for those kernels, launch facts' tma_o,
// and passes a fourth map to every one: a kernel that declares three ignores it).
#if FTP_OSTORE
#define FT_DEFINE_KERNEL(name)                                                                           \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, ft::CTAS)                                  \
        name(const ft::FwdParams p, const __grid_constant__ ft::TensorMap tq,                            \
             const __grid_constant__ ft::TensorMap tk, const __grid_constant__ ft::TensorMap tv,         \
             const __grid_constant__ ft::TensorMap to)                                                   \
    {                                                                                                    \
        ft::flash_fwd(p, &tq, &tk, &tv, &to);                                                            \
    }
#else
#define FT_DEFINE_KERNEL(name)                                                                           \
    extern "C" __global__ void __launch_bounds__(ft::THREADS, ft::CTAS)                                  \
        name(const ft::FwdParams p, const __grid_constant__ ft::TensorMap tq,                            \
             const __grid_constant__ ft::TensorMap tk, const __grid_constant__ ft::TensorMap tv)         \
    {                                                                                                    \
        ft::flash_fwd(p, &tq, &tk, &tv, nullptr);                                                        \
    }
#endif
