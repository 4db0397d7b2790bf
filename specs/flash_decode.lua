-- The forward for short queries against long keys (decode, speculative and chunked steps): split
-- keys with a combine kernel and grouped query heads packed as rows, on mma.sync m16n8k16
-- (templates/flash_decode_sm80.cuh), for Ampere, Ada and Hopper.
--
-- A variant reads "d=128,bn=64,warps=4,stages=2,mt=1,pack=1,causal=0,dtype=bf16". A block owns
-- 16·mt rows (pack=1: the query heads of one K/V head times the queries; pack=0: one query head's
-- queries) and a run of the keys they see; its warps take the run's tiles of bn keys in turn, each
-- with its own ring of `stages` K and V tiles. How many runs the keys are split into is decided
-- per call from the GPU's size (ops/fwd.c), not by the variant.

-- Elements per row of a shared-memory tile: the head dim rounded up to whole k16 steps of Q·Kᵀ,
-- plus one spare 16-byte chunk (no bank conflicts; see flash_fwd_sm80).
local function pitch(v)
  return (v.d + 15) // 16 * 16 + 8
end

local function registers(v)
  -- O (fp32), Q's fragments, S, and about 40 for addresses, row statistics and loop state: a lower
  -- bound; ptxas reports the real count after compiling.
  return v.mt * v.d // 2 + v.mt * v.d // 4 + v.mt * v.bn // 2 + 40
end

-- Serving shapes: one query per sequence with grouped heads (the issue's decode grid), a few
-- queries (speculative steps), and one sequence against a very long cache.
local workloads = {}
for _, d in ipairs({ 64, 128, 256 }) do
  local h = 4096 // d
  workloads[#workloads + 1] = { b = 32, hq = h, hkv = h // 8, sq = 1, sk = 8192, d = d }
  workloads[#workloads + 1] = { b = 4, hq = 8, hkv = 1, sq = 1, sk = 131072, d = d }
  workloads[#workloads + 1] = { b = 128, hq = 16, hkv = 2, sq = 2, sk = 2048, d = d }
  workloads[#workloads + 1] = { b = 8, hq = h, hkv = h, sq = 4, sk = 16384, d = d }
  workloads[#workloads + 1] = { b = 16, hq = h, hkv = h // 4, sq = 16, sk = 4096, d = d }
end
for _, d in ipairs({ 32, 96, 192 }) do
  workloads[#workloads + 1] = { b = 32, hq = 32, hkv = 4, sq = 1, sk = 8192, d = d }
end

return {
  name = "flash_decode",
  template = "flash_decode_sm80",
  description = "forward for short queries: split keys, packed query heads (mma.sync, sm_80 and newer)",

  params = {
    { name = "d",      values = { 32, 64, 80, 96, 128, 160, 192, 256 }, open = true,
      doc = "head dimension (a call or --only d=N adds any other multiple of 8 from 32 to 256)" },
    { name = "bn",     values = { 16, 32, 64 },   doc = "keys per K/V tile of one warp" },
    { name = "warps",  values = { 2, 4, 8 },      doc = "warps per block, each on its own tiles of the block's keys" },
    { name = "stages", values = { 2, 3 },         doc = "depth of each warp's cp.async K/V ring" },
    { name = "mt",     values = { 1, 2 },         doc = "m16 row tiles per block (16 or 32 rows)" },
    { name = "pack",   values = { 0, 1 },         doc = "1: a block's rows are the query heads sharing a K/V head times the queries" },
    { name = "causal", values = { 0, 1 },         doc = "bottom-right causal mask" },
    { name = "dtype",  values = { "f16", "bf16" }, doc = "element type of Q, K, V and O" },
  },

  constraints = {
    { "head dims are multiples of 8 from 32 to 256",
      function(v) return v.d % 8 == 0 and v.d >= 32 and v.d <= 256 end },
    { "the warps' results merge over their rings",
      function(v)
        local rings = v.warps * v.stages * 2 * v.bn * pitch(v) * 2
        return v.warps * 16 * v.mt * (v.d + 6) * 4 <= 16 * v.mt * pitch(v) * 2 + rings
      end },
    { "registers within the 255 a thread can have",
      function(v) return registers(v) <= 255 end },
  },

  -- Q's rows, then each warp's ring of `stages` K and V tiles, rows of `pitch` elements.
  smem = function(v)
    return (16 * v.mt + v.warps * v.stages * 2 * v.bn) * pitch(v) * 2
  end,

  registers = registers,

  workloads = workloads,

  spills = "reject",
}
