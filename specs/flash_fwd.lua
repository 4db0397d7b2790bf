-- The default forward search space: FlashAttention-2-style kernels on mma.sync
-- (templates/flash_fwd_sm80.cuh), for Ampere, Ada and Hopper.
--
-- Every parameter becomes a compile-time constant of the template; `flashtune plan` prints
-- each variant as "d=128,bm=128,bn=64,warps=4,stages=2,causal=0,dtype=f16,qreg=0,overlap=1".

-- Query rows of one m16 tile group per warp: 1 (16 rows) or 2 (32 rows).
local function m_tiles(v)
  return v.bm // v.warps // 16
end

-- Elements per row of a shared-memory tile: the head dim rounded up to whole k16 steps of Q·Kᵀ,
-- plus one spare 16-byte chunk (no bank conflicts; see the template).
local function pitch(v)
  return (v.d + 15) // 16 * 16 + 8
end

-- The tuner's workloads: the FlashAttention-2/3 papers' grid (specs/lib/workloads.lua) at head
-- dims 64, 128 and 256, and two sequence lengths for the other head dims.
local workloads = require("workloads").paper_grid({ 64, 128, 256 }, { 32, 96, 192 })

return {
  name = "flash_fwd",
  template = "flash_fwd_sm80",
  description = "FlashAttention-2 forward on mma.sync m16n8k16 (sm_80 and newer)",

  params = {
    { name = "d",      values = { 32, 64, 80, 96, 128, 160, 192, 256 }, open = true,
      doc = "head dimension (a call or --only d=N adds any other multiple of 8 from 32 to 256)" },
    { name = "bm",     values = { 64, 128 },      doc = "query rows per thread block" },
    { name = "bn",     values = { 32, 64, 128 },  doc = "keys per K/V tile" },
    { name = "warps",  values = { 4, 8 },         doc = "warps per thread block" },
    { name = "stages", values = { 1, 2, 3 },      doc = "depth of the cp.async K/V ring" },
    { name = "causal", values = { 0, 1 },         doc = "bottom-right causal mask" },
    { name = "dtype",  values = { "f16", "bf16" }, doc = "element type of Q, K, V and O" },
    { name = "qreg",   values = { 0, 1 },         doc = "1: Q's fragments stay in registers" },
    { name = "overlap", values = { 0, 1 },        doc = "1: P·V of one tile beside Q·Kᵀ of the next" },
  },

  constraints = {
    { "head dims are multiples of 8 from 32 to 256",
      function(v) return v.d % 8 == 0 and v.d >= 32 and v.d <= 256 end },
    { "each warp owns a multiple of 16 query rows",
      function(v) return v.bm % (16 * v.warps) == 0 end },
    { "at most two m16 tiles per warp",
      function(v) return m_tiles(v) <= 2 end },
    { "overlap needs at least two stages",
      function(v) return v.overlap == 0 or v.stages >= 2 end },
  },

  -- Q tile plus `stages` K and V tiles, rows of `pitch` elements.
  smem = function(v)
    return (v.bm + 2 * v.stages * v.bn) * pitch(v) * 2
  end,

  -- Accumulators (fp32 O and S), Q fragments, P kept packed across tiles when overlapping,
  -- and about 40 for addresses, row statistics and loop state. A lower bound: ptxas reports
  -- the real count after compiling.
  registers = function(v)
    local mt = m_tiles(v)
    local q = (v.qreg == 1) and (mt * v.d // 4) or (mt * 4)
    local p = (v.overlap == 1) and (mt * v.bn // 8) or 0
    return mt * v.d // 2 + mt * v.bn // 2 + q + p + 40
  end,

  workloads = workloads,
}
