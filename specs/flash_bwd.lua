-- The backward search space: FlashAttention-2-style dQ, dK, dV kernels on mma.sync
-- (templates/flash_bwd_sm80.cuh), for Ampere, Ada and Hopper.
--
-- Every parameter becomes a compile-time constant of the template; a variant reads
-- "d=128,bm=64,bn=128,warps=8,split=1,stages=2,causal=0,dtype=bf16,gqa=loop,det=0".
-- A CTA owns bn keys of one K/V head (gqa=loop) or one query head (gqa=atomic) and loops over
-- the query blocks of bm rows that see them; its warps form warps/split key groups of one or
-- two m16 tiles of keys, each split into `split` parts along the queries of S and dP and along
-- the columns of dK and dV.

-- The tiles' width: the head dim rounded up to whole k16 steps (d = 72: 80); the loads fill the
-- columns past the head dim with zeros, and the products compute over the whole width.
local function width(v) return (v.d + 15) // 16 * 16 end

-- Key groups, m16 tiles of keys per warp, query rows and dK/dV columns per warp.
local function key_groups(v) return v.warps // v.split end
local function key_tiles(v) return v.bn // (16 * key_groups(v)) end
local function warp_queries(v) return v.bm // v.split end
local function warp_columns(v) return width(v) // v.split end

-- The dQ product's warp grid, as the template picks it (dq_layout): wm warps along the bm
-- rows and warps/wm along the tiles' width, tiles of a multiple of 16 rows and of 16 columns (8
-- at widths that are odd multiples of 16, which 16s split no further), the squarest (smallest
-- tm + td), among equals the one with more warps along the rows. 0 when none exists.
local function dq_rows_warps(v)
  local best, cost = 0, math.huge
  local w = width(v)
  local cols = w % 32 == 0 and 16 or 8
  local wm = v.warps
  while wm >= 1 do
    local wd = v.warps // wm
    if v.bm % (16 * wm) == 0 and w % (cols * wd) == 0 then
      local c = v.bm // wm + w // wd
      if c < cost then
        best, cost = wm, c
      end
    end
    wm = wm // 2
  end
  return best
end

-- The tuner's workloads: the forward's grid (specs/lib/workloads.lua) at head dims 64, 128 and
-- 256, and two sequence lengths for the other head dims.
local workloads = require("workloads").paper_grid({ 64, 128, 256 }, { 32, 96, 192 })

return {
  name = "flash_bwd",
  template = "flash_bwd_sm80",
  description = "FlashAttention-2 backward (dQ, dK, dV) on mma.sync m16n8k16 (sm_80 and newer)",

  params = {
    { name = "d",      values = { 32, 64, 80, 96, 128, 160, 192, 256 }, open = true,
      doc = "head dimension (a call or --only d=N adds any other multiple of 8 from 32 to 256)" },
    { name = "bm",     values = { 32, 64, 128 },   doc = "query rows per block of the CTA's loop" },
    { name = "bn",     values = { 32, 64, 128 },   doc = "keys per thread block" },
    { name = "warps",  values = { 4, 8 },          doc = "warps per thread block" },
    { name = "split",  values = { 1, 2 },
      doc = "warps per key group (2: P and dS pass through shared memory)" },
    { name = "stages", values = { 1, 2 },
      doc = "Q/dO buffers (2: the next query block loads while this one computes)" },
    { name = "causal", values = { 0, 1 },          doc = "bottom-right causal mask" },
    { name = "dtype",  values = { "f16", "bf16" }, doc = "element type of Q, K, V, O, dO and the gradients" },
    { name = "gqa",    values = { "loop", "atomic" },
      doc = "grouped-query dK/dV: loop = one CTA walks the group's query heads; "
            .. "atomic = one CTA per query head, fp32 sums in the workspace" },
    { name = "det",    values = { 0, 1 },
      doc = "1: dQ (and gqa=atomic dK/dV) added in a fixed order: bitwise reproducible" },
  },

  constraints = {
    { "head dims are multiples of 8 from 32 to 256",
      function(v) return v.d % 8 == 0 and v.d >= 32 and v.d <= 256 end },
    { "each warp owns one or two m16 tiles of keys",
      function(v)
        return v.bn % (16 * key_groups(v)) == 0 and key_tiles(v) >= 1 and key_tiles(v) <= 2
      end },
    { "each part owns a multiple of 16 query rows",
      function(v) return v.bm % (16 * v.split) == 0 end },
    { "the dQ product needs a warp grid of tiles of 16 × 16 or more (16 × 8 at odd multiples of 16)",
      function(v) return dq_rows_warps(v) > 0 end },
    { "split = 2 is for head dims whose dK and dV do not fit one warp's registers (d >= 128)",
      function(v) return v.split == 1 or width(v) >= 128 end },
  },

  -- K and V tiles, `stages` Q and dO tiles (rows of the tiles' width padded by 8 elements, 16
  -- bytes), the dSᵀ tile [bn][bm + 8] (and with split = 2 the Pᵀ tile), `stages` × bm floats of
  -- LSE·log2(e) and of D.
  smem = function(v)
    local row = (width(v) + 8) * 2
    local s_tile = v.bn * (v.bm + 8) * 2
    return 2 * v.bn * row + 2 * v.stages * v.bm * row + v.split * s_tile + 2 * v.stages * v.bm * 4
  end,

  -- Per thread: the fp32 dK and dV accumulators, dPᵀ whole and Sᵀ in chunks of 32 queries
  -- (fp32), and about 40 for addresses, indices and loop state. A lower bound: ptxas reports
  -- the real count after compiling.
  registers = function(v)
    local mk = key_tiles(v)
    local q = warp_queries(v)
    local chunk = q < 32 and q or 32
    return mk * warp_columns(v) + mk * q // 2 + mk * chunk // 2 + 40
  end,

  workloads = workloads,

  -- dK and dV live in registers for the whole kernel: a variant that spills is never a candidate.
  spills = "reject",
}
