-- The Hopper backward search space: dQ, dK, dV kernels on wgmma (templates/flash_bwd_sm90.cuh),
-- for compute capability 9.0 only (sm_90a code).
--
-- Every parameter becomes a compile-time constant of the template; a variant reads
-- "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=0,gqa=loop,dtype=bf16".
-- A CTA owns bn keys of one K/V head and loops over the query blocks of bm rows that see them
-- (every query head of the K/V group in turn; gqa=atomic: of one query head, dK and dV summed
-- over the group in the workspace). Its consumer warpgroups split the keys, 64
-- each, and so compute their keys' Sᵀ, dPᵀ, dK and dV alone; or, with kvsplit, two of them share 64 keys,
-- each computing Sᵀ and dPᵀ for half of the block's queries and dK and dV for half of the head
-- dimension (what fits in registers at d = 256). Each computes its share of the block's dQ
-- partial (split by columns with bm = 64, by rows with bm = 128; with bm = 80, which no wgmma's
-- m is, by columns of dQ transposed, 64 a pass, the queries as n). A producer warpgroup loads
-- the blocks (TMA) and adds the dQ partials into the workspace (bulk reductions), or the
-- consumers add them from registers (dq_red).

local hopper = require("hopper")

-- The tiles' width: the head dim rounded up to whole k16 steps, and with kvsplit to two halves
-- of whole k16 steps, a multiple of 32 (d = 72: 80; 168 and 176 with kvsplit: 192; 240: 256).
-- TMA fills the columns past the head dim with zeros, and the products compute over the whole
-- width (generator/family.c bwd_sm90_tile_width).
local function width(v)
  if v.kvsplit == 1 then return (v.d + 31) // 32 * 32 end
  return (v.d + 15) // 16 * 16
end

-- Consumer warpgroups: one per 64 keys, or two sharing them (kvsplit).
local function consumers(v)
  if v.kvsplit == 1 then return 2 end
  return v.bn // 64
end

-- The columns of dQ's partial that each consumer warpgroup computes: the whole width when two
-- warpgroups split its rows (bm = 128), else width / warpgroups.
local function dq_columns(v)
  if v.bm == 128 then return width(v) end
  return width(v) // consumers(v)
end

-- dQ transposed (dQᵀ = Kᵀ·dSᵀ): when bm is not a multiple of 64, wgmma's m.
local function dq_transposed(v)
  return v.bm % 64 ~= 0
end

-- The width of one pass over those columns: the fewest passes of equal width, a multiple of 16
-- and at most 112, that make them up; transposed, passes of 64 (nil when none does).
-- generator/family.c (bwd_sm90_cut) computes the same, and the swizzle span of the tiles from
-- it; the template checks both.
local function dq_width(v)
  local dc = dq_columns(v)
  if dq_transposed(v) then return dc % 64 == 0 and 64 or nil end
  for passes = 1, dc // 16 do
    local w = dc // passes
    if dc % passes == 0 and w % 16 == 0 and w <= 112 then return w end
  end
  return nil
end

-- The tiles' column blocks (the swizzle span): the widest of 64, 32 and 16 elements that the
-- width, a warpgroup's dK/dV columns and its dQ pass are all multiples of (generator/family.c
-- bwd_sm90_cut computes the same).
local function span(v)
  local w, dkv, pw = width(v), v.kvsplit == 1 and width(v) // 2 or width(v), dq_width(v) or 16
  for _, s in ipairs({ 64, 32, 16 }) do
    if w % s == 0 and dkv % s == 0 and pw % s == 0 then return s end
  end
  return 16
end

-- Per consumer thread: see `registers` below. With two consumers the producer gives its
-- registers to them (setmaxnreg; specs/lib/hopper.lua says how many).
local function consumer_registers(v)
  if v.kvsplit == 1 then
    -- dK and dV (width/4 each), then the larger of what the two phases hold: Sᵀ and dPᵀ with
    -- their packings (bm/4 + bm/8 each), or the dQ partial's passes, all in flight at once
    -- (width/4).
    return width(v) // 2 + math.max(3 * v.bm // 4, width(v) // 4) + 24
  end
  -- dK and dV (width/2 each), then the larger of Sᵀ and dPᵀ (bm/2 each) and a pass of dQ's
  -- partial (its width/2; transposed bm/2) beside Pᵀ and dSᵀ packed (bm/4 each).
  local pass = dq_transposed(v) and v.bm // 2 or (dq_width(v) or 64) // 2
  return width(v) + math.max(v.bm, v.bm // 2 + pass) + 24
end

local function register_limit(v)
  return hopper.consumer_register_limit(consumers(v))
end

-- The tuner's workloads: the forward's grid (specs/lib/workloads.lua) at head dims 64, 128, 256,
-- and at 1k and 4k at 32, 96 and 192 (the sm80 backward's short head dims: on compute capability
-- 9.0 the runtime's defaults there are this family's, so a tune measures them here too); and
-- at d = 64 and 128, 1k, 4k and 16k, the same shapes with 8 query heads per K/V head, where
-- gqa=loop and gqa=atomic differ (with one head per group they are the same kernel's work).
local grid = require("workloads")
local workloads = grid.concat(grid.paper_grid({ 64, 128, 256 }, { 32, 96, 192 }),
                              grid.grouped({ 64, 128 }, { 1024, 4096, 16384 }, 8))

return {
  name = "flash_bwd_sm90",
  template = "flash_bwd_sm90",
  description = "Hopper backward (dQ, dK, dV) on wgmma (sm_90a)",

  params = {
    { name = "d",      values = { 64, 80, 96, 128, 160, 192, 256 }, open = true,
      doc = "head dimension (a call or --only d=N adds any other multiple of 8 from 32 to 256)" },
    { name = "bm",     values = { 64, 80, 128 },   doc = "query rows per block of the CTA's loop (128: two consumer warpgroups split dQ by rows; 80: dQ computed transposed, its columns as wgmma's m)" },
    { name = "bn",     values = { 64, 128 },       doc = "keys per thread block: 64 per consumer warpgroup" },
    { name = "causal", values = { 0, 1 },          doc = "bottom-right causal mask" },
    { name = "early_dv", values = { 0, 1, 2, 3 },
      doc = "1: dV's product issued while dPᵀ's runs (more registers live at once); 2: Pᵀ's exponentials while dPᵀ's runs, dV after dSᵀ; 3: as 1, each k16 step of dV issued as soon as its columns of Pᵀ are made; 0: both after dPᵀ" },
    { name = "lpt",    values = { 0, 1 },          doc = "causal, 1: key blocks launched longest walk first (all heads' first block, then the next)" },
    { name = "kvsplit", values = { 0, 1 },         doc = "1: two consumer warpgroups share 64 keys, each with half of dK's and dV's columns (Pᵀ and dSᵀ through shared memory)" },
    { name = "dq_red", values = { 0, 1 },          doc = "1: the consumers add dQ's partials to the workspace from registers (red.global.add), no staging buffer" },
    { name = "det",    values = { 0, 1 },          doc = "1: deterministic: the bulk reductions into each dQ tile in a fixed order of key blocks (counters in the workspace)" },
    { name = "s_ahead", values = { 0, 1 }, default = 0, doc = "1: the next query block's Sᵀ issued before this block's dK is waited for (the tensor cores get it while the block's last steps run)" },
    { name = "dq_late", values = { 0, 1 }, default = 0, doc = "1: a block's staged dQ partial handed to the producer after the next block's Sᵀ and dPᵀ are issued, not before dK is waited for (the next Sᵀ queued as soon as dK is done)" },
    { name = "qrot",   values = { 0, 1 }, default = 0, doc = "non-causal, 1: each key block starts its walk at its own query block (key block j at row block j, modulo the walk), so the CTAs running at once add into different dQ tiles, not all into the same one" },
    { name = "gqa",    values = { "loop", "atomic" }, default = "loop",
      doc = "grouped-query heads: a CTA's keys of one K/V head, walking every query head of its group (loop), or of one query head, dK and dV summed over the group in fp32 by atomics (atomic: a group's times more CTAs, each walk a group's times shorter)" },
    { name = "dtype",  values = { "f16", "bf16" }, doc = "element type of Q, K, V, O, dO and the gradients" },
  },

  constraints = {
    { "head dims are multiples of 8 from 32 to 256",
      function(v) return v.d % 8 == 0 and v.d >= 32 and v.d <= 256 end },
    { "the launch order by walk length is for causal masks",
      function(v) return v.lpt == 0 or v.causal == 1 end },
    { "128 query rows per block take two consumer warpgroups of 64 keys each",
      function(v) return v.bm ~= 128 or (v.bn == 128 and v.kvsplit == 0) end },
    { "two warpgroups sharing keys share 64 of them, and each computes half of a block's queries' Sᵀ",
      function(v) return v.kvsplit == 0 or (v.bn == 64 and v.bm == 64) end },
    { "with shared keys dV's product needs both warpgroups' Pᵀ: it cannot start while dPᵀ runs",
      function(v) return v.kvsplit == 0 or (v.early_dv ~= 1 and v.early_dv ~= 3) end },
    { "dV's steps issued one by one as Pᵀ is made are not with the next block's Sᵀ issued ahead",
      function(v) return v.early_dv ~= 3 or v.s_ahead == 0 end },
    { "with shared keys the next block's Sᵀ is not issued ahead",
      function(v) return v.s_ahead == 0 or v.kvsplit == 0 end },
    { "the dQ partial's late hand-off is of a staged partial, without the next Sᵀ issued ahead or shared keys",
      function(v) return v.dq_late == 0 or (v.dq_red == 0 and v.s_ahead == 0 and v.kvsplit == 0) end },
    { "the walks start at different query blocks only without a causal mask (whose walks start at the diagonal, apart already) and without a fixed order of dQ's additions",
      function(v) return v.qrot == 0 or (v.causal == 0 and v.det == 0) end },
    { "the fixed order of dQ's additions is kept by the producer's bulk reductions, in the launch order",
      function(v) return v.det == 0 or (v.dq_red == 0 and v.lpt == 0) end },
    { "dK and dV summed by atomics have no fixed order of additions",
      function(v) return v.gqa == "loop" or v.det == 0 end },
    { "each warpgroup's dQ columns go in passes of a multiple of 16 columns (at most 112; transposed, of 64), its dK and dV columns are a multiple of 16",
      function(v) return dq_width(v) ~= nil and (v.kvsplit == 0 or (width(v) // 2) % 16 == 0) end },
    { "consumer registers within what setmaxnreg gives them",
      function(v) return consumer_registers(v) <= register_limit(v) end },
  },

  -- K and V tiles, two stages of Q and dO tiles, two dSᵀ tiles [bn][bm] (kvsplit: and two Pᵀ
  -- tiles), the fp32 dQ staging tile [bm][width] (not with dq_red), two stages of bm floats of
  -- LSE·log2(e) and of D, 64 bytes of mbarriers, and 1024 bytes to align the base for the
  -- swizzle. Tiles are width(v) wide.
  smem = function(v)
    local w = width(v)
    return 1024 + 2 * v.bn * w * 2 + 2 * 2 * v.bm * w * 2 + 2 * (1 + v.kvsplit) * v.bn * v.bm * 2
      + (1 - v.dq_red) * v.bm * w * 4 + 2 * 2 * v.bm * 4 + 64
  end,

  -- Per consumer thread: the fp32 dK and dV accumulators (width/2 each), Sᵀ and dPᵀ (bm/2 each),
  -- their 16-bit packings (bm/4 each, built as those die), and about 24 for addresses and loop
  -- state; with kvsplit as consumer_registers says. A lower bound: ptxas reports the real count
  -- after compiling.
  registers = function(v)
    return consumer_registers(v)
  end,

  workloads = workloads,

  -- dK and dV live in registers for the whole kernel: a variant that spills is never a candidate.
  spills = "reject",
}
