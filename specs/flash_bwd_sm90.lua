-- The Hopper backward search space: dQ, dK, dV kernels on wgmma (templates/flash_bwd_sm90.cuh),
-- for compute capability 9.0 only (sm_90a code).
--
-- Every parameter becomes a compile-time constant of the template; a variant reads
-- "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,dtype=bf16". A CTA owns bn keys of one K/V
-- head, one consumer warpgroup per 64 of them, and loops over the query blocks of bm rows that
-- see them (every query head of the K/V group in turn); each consumer computes its keys' Sᵀ,
-- dPᵀ, dK and dV and its share of the block's dQ partial (d·64/bn of the columns with bm = 64,
-- half of the rows with bm = 128). A producer warpgroup loads the blocks (TMA) and adds the dQ
-- partials into the workspace (bulk reductions).

local hopper = require("hopper")

-- Per consumer thread: see `registers` below. One consumer warpgroup per 64 keys; with two the
-- producer gives its registers to them (setmaxnreg; specs/lib/hopper.lua says how many).
local function consumer_registers(v)
  return v.d + v.bm + 24
end

local function register_limit(v)
  return hopper.consumer_register_limit(v.bn // 64)
end

-- The tuner's workloads: the forward's grid (specs/lib/workloads.lua) at head dims 64 and 128.
local workloads = require("workloads").paper_grid({ 64, 128 }, {})

return {
  name = "flash_bwd_sm90",
  template = "flash_bwd_sm90",
  description = "Hopper backward (dQ, dK, dV) on wgmma (sm_90a)",

  params = {
    { name = "d",      values = { 64, 128 },       doc = "head dimension" },
    { name = "bm",     values = { 64, 128 },       doc = "query rows per block of the CTA's loop (128: two consumer warpgroups split dQ by rows)" },
    { name = "bn",     values = { 64, 128 },       doc = "keys per thread block: 64 per consumer warpgroup" },
    { name = "causal", values = { 0, 1 },          doc = "bottom-right causal mask" },
    { name = "early_dv", values = { 0, 1 },        doc = "1: dV's product issued while dPᵀ's runs (more registers live at once)" },
    { name = "lpt",    values = { 0, 1 },          doc = "causal, 1: key blocks launched longest walk first (all heads' first block, then the next)" },
    { name = "dtype",  values = { "f16", "bf16" }, doc = "element type of Q, K, V, O, dO and the gradients" },
  },

  constraints = {
    { "the launch order by walk length is for causal masks",
      function(v) return v.lpt == 0 or v.causal == 1 end },
    { "128 query rows per block take two consumer warpgroups",
      function(v) return v.bm == 64 or v.bn == 128 end },
    { "each warpgroup's share of dQ's columns is whole blocks of 64",
      function(v) return v.bm == 128 or (v.d // (v.bn // 64)) % 64 == 0 end },
    { "consumer registers within what setmaxnreg gives them",
      function(v) return consumer_registers(v) <= register_limit(v) end },
  },

  -- K and V tiles, two stages of Q and dO tiles, two dSᵀ tiles [bn][bm], the fp32 dQ staging
  -- tile [bm][d], two stages of bm floats of LSE·log2(e) and of D, 64 bytes of mbarriers, and
  -- 1024 bytes to align the base for the swizzle.
  smem = function(v)
    return 1024 + 2 * v.bn * v.d * 2 + 2 * 2 * v.bm * v.d * 2 + 2 * v.bn * v.bm * 2 + v.bm * v.d * 4
      + 2 * 2 * v.bm * 4 + 64
  end,

  -- Per consumer thread: the fp32 dK and dV accumulators (d/2 each), Sᵀ and dPᵀ (bm/2 each),
  -- their 16-bit packings (bm/4 each, built as those die), and about 24 for addresses and loop
  -- state. A lower bound: ptxas reports the real count after compiling.
  registers = function(v)
    return consumer_registers(v)
  end,

  workloads = workloads,

  -- dK and dV live in registers for the whole kernel: a variant that spills is never a candidate.
  spills = "reject",
}
