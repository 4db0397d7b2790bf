-- The Hopper forward search space: warp-specialised kernels on wgmma and TMA
-- (templates/flash_fwd_sm90.cuh), compiled for sm_90a; they run only on compute capability 9.0.
--
-- Every parameter becomes a compile-time constant of the template; `flashtune plan --arch sm_90a
-- flash_fwd_sm90` prints each variant as
-- "d=128,bm=128,bn=128,stages=2,causal=0,dtype=f16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,
-- ostore=0,early_rescale=0,ctas=1,pack=0".

local hopper = require("hopper")

-- Consumer warpgroups: one per 64 query rows. The producer warpgroup hands its registers to
-- them (setmaxnreg; specs/lib/hopper.lua says how many each gets).
local function register_limit(v)
  return hopper.consumer_register_limit(v.bm // 64, v.ctas)
end

-- The tiles' width: the head dim rounded up to whole k16 steps.
local function tile_width(v)
  return (v.d + 15) // 16 * 16
end

-- Dynamic shared memory with `q_bufs` Q buffers (see `smem` below).
local function smem_bytes(v, q_bufs)
  local dk = tile_width(v)
  local body = q_bufs * v.bm * dk * 2 + 2 * v.stages * v.bn * dk * 2
  if v.psmem == 1 then
    body = (body + 1023) // 1024 * 1024 + v.bm * v.bn * 2
  end
  return 1024 + body + 8 * (8 + 4 * v.stages) + 128
end

-- The shared memory a CTA may take: the target's per block, or with two CTAs a multiprocessor
-- half of the multiprocessor's, less the 1 KiB the hardware keeps for each CTA.
local function smem_budget(v, arch)
  if v.ctas == 2 then return arch.smem_per_sm // 2 - 1024 end
  return arch.smem_per_block
end

-- Two Q buffers where they fit in that budget, else one.
local function q_buffers(v, arch)
  if smem_bytes(v, 2) <= smem_budget(v, arch) then return 2 end
  return 1
end

-- Per consumer thread: O (d/2 fp32, d rounded up to 16), S (bn/2 fp32), P (bn/4 packed pairs;
-- with psmem, which stores P to shared memory as it packs it, 8 for the stores' addresses), and
-- about 32 for addresses, row statistics and loop state. An estimate that prunes before
-- compiling: ptxas reports the spills of what it lets through, and the spec rejects those. It
-- must not prune what fits: with 40 it had left out d = 64 at bm = 192, bn = 128 (160 registers
-- a thread under three consumer warpgroups; ptxas fits it without spilling, sm_90a, NVRTC 13.0),
-- the 192 x 128 tile FlashAttention-3 uses for causal d <= 64; bn = 176 and 192 spill there.
local function consumer_registers(v)
  local p = v.psmem == 1 and 8 or v.bn // 4
  return tile_width(v) // 2 + v.bn // 2 + p + 32
end

-- The tuner's workloads: the same grid as specs/flash_fwd.lua (specs/lib/workloads.lua), so both
-- families are measured on the same buckets; and at d = 64, 1k, 4k and 16k, the same shapes with
-- 8 query heads per K/V head, where `pack` matters (the tuner measures pack = 1 only where a
-- K/V head has more than one query head: with one it is the unpacked kernel's work).
local grid = require("workloads")
local workloads = grid.concat(grid.paper_grid({ 64, 128, 256 }, { 96, 192 }),
                              grid.grouped({ 64 }, { 1024, 4096, 16384 }, 8))

return {
  name = "flash_fwd_sm90",
  template = "flash_fwd_sm90",
  description = "Hopper forward: TMA, wgmma, producer/consumer warpgroups (sm_90a)",

  params = {
    { name = "d",        values = { 64, 80, 96, 128, 160, 192, 256 }, open = true,
      doc = "head dimension (a call or --only d=N adds any other multiple of 8 from 32 to 256)" },
    { name = "bm",       values = { 64, 128, 192 },   doc = "query rows per thread block (64 per consumer warpgroup)" },
    { name = "bn",       values = { 64, 80, 96, 112, 128, 144, 176, 192 },
      doc = "keys per K/V tile (112: above d = 128; 144: with psmem)" },
    { name = "stages",   values = { 2, 3 },           doc = "depth of the TMA K/V ring" },
    { name = "causal",   values = { 0, 1 },           doc = "bottom-right causal mask" },
    { name = "dtype",    values = { "f16", "bf16" },  doc = "element type of Q, K, V and O" },
    { name = "pingpong", values = { 0, 1 },
      doc = "1: the consumer warpgroups (two or three) take turns on the tensor cores, round robin" },
    { name = "overlap",  values = { 0, 1, 2 },
      doc = "1: softmax of one tile while P·V of the previous runs; 2: across row blocks too (a block's last P·V with the next block's first S)" },
    { name = "balance",  values = { 0, 1, 2 },
      doc = "causal, 1: persistent CTAs, each taking a long and a short row block of a head in turn; 2: persistent CTAs taking the row blocks longest first from a counter, in sections of heads whose K and V share the L2 cache" },
    { name = "psmem",    values = { 0, 1 }, default = 0,
      doc = "1: P goes through shared memory and P·V reads it there (192-row tiles: frees P's registers for wider key tiles)" },
    { name = "pexp",     values = { 0, 2 }, default = 0,
      doc = "of every 8 exponentials, how many the FMA pipe computes (a polynomial) instead of the multi-function unit" },
    { name = "skip_rescale", values = { 0, 1 }, default = 0,
      doc = "1: O is rescaled only in warps where some row found a new maximum (exact: the others' factor is 1)" },
    { name = "ostore",   values = { 0, 1 }, default = 0,
      doc = "1: O leaves through shared memory (over the block's Q tile) and TMA stores, whole rows at a time" },
    { name = "early_rescale", values = { 0, 1 }, default = 0,
      doc = "1: O is rescaled while the tensor cores compute the next S, before the previous P·V is issued" },
    { name = "ctas",     values = { 1, 2 }, default = 1,
      doc = "CTAs a multiprocessor holds: 2 with one consumer warpgroup (bm = 64), launched at 128 registers a thread" },
    { name = "pack",     values = { 0, 1 }, default = 0,
      doc = "1: a row block's rows are the query heads of one K/V head times bm / G positions (G, the heads per K/V head, dividing 64; else one head a block)" },
  },

  constraints = {
    { "head dims are multiples of 8 from 32 to 256",
      function(v) return v.d % 8 == 0 and v.d >= 32 and v.d <= 256 end },
    { "ping-pong takes two or three consumer warpgroups",
      function(v) return v.pingpong == 0 or v.bm >= 128 end },
    { "balanced units and the longest-first order are for causal row blocks",
      function(v) return v.balance == 0 or v.causal == 1 end },
    { "P through shared memory is for 192-row tiles, whose three consumer warpgroups are short of registers",
      function(v) return v.psmem == 0 or v.bm == 192 end },
    { "144-key tiles take P through shared memory (FlashAttention-4's 192 x 144 tile)",
      function(v) return v.bn ~= 144 or v.psmem == 1 end },
    -- (at d = 64 the causal 192 x 176 variants spilled 16-44 bytes, sm_90a, NVRTC 13.0, where
    -- the non-causal ones fit: the mask's column limits)
    { "causal tiles with P through shared memory take at most 144 keys",
      function(v) return v.psmem == 0 or v.causal == 0 or v.bn <= 144 end },
    { "112-key tiles are for head dims above 128 (FlashAttention-3's 128 x 112 at d = 192)",
      function(v) return v.bn ~= 112 or v.d > 128 end },
    { "exponentials by FMA where they pace the tensor cores (head dims up to 64)",
      function(v) return v.pexp == 0 or v.d <= 64 end },
    { "the rescale is skipped where O is wide enough for it to matter (head dims from 128)",
      function(v) return v.skip_rescale == 0 or v.d >= 128 end },
    -- FlashAttention-4 (flash_fwd_sm90.py) rescales O before the GEMM where the head dim of V is
    -- above 128, and only in its overlapped schedule.
    { "the early rescale is for the overlapped schedule and O wider than 128 columns",
      function(v) return v.early_rescale == 0 or (v.overlap >= 1 and v.d > 128) end },
    { "blocks overlapped across take no ping-pong turns",
      function(v) return v.overlap <= 1 or v.pingpong == 0 end },
    { "consumer registers within what setmaxnreg gives them",
      function(v) return consumer_registers(v) <= register_limit(v) end },
    -- Two CTAs a multiprocessor, each a producer and one consumer warpgroup: the hardware
    -- interleaves their warps as ping-pong interleaves two warpgroups of one CTA, and one CTA's
    -- start and end of a block (Q's load, the first S, O's stores) run beside the other's
    -- matrix products, which short blocks (causal, 512-1k) spend much of their time on.
    { "two CTAs a multiprocessor take one consumer warpgroup each (bm = 64)",
      function(v) return v.ctas == 1 or v.bm == 64 end },
    { "two CTAs a multiprocessor fit its shared memory",
      function(v, arch) return v.ctas == 1 or smem_bytes(v, q_buffers(v, arch)) <= smem_budget(v, arch) end },
    -- (with one Q buffer the next block's first S would need the Q tile that O still occupies)
    -- (FlashAttention-4 packs at every head dim on the H100; here the grouped prefill's gap to it
    -- was at d = 64, none at 128: bench/results/h100-2026-12-07-gqa)
    { "query heads packed into a block's rows at head dims up to 128",
      function(v) return v.pack == 0 or v.d <= 128 end },
    { "O through the only Q buffer ends the block before the next one starts (no overlap across blocks)",
      function(v, arch) return v.ostore == 0 or v.overlap <= 1 or q_buffers(v, arch) == 2 end },
    -- (the GPU verifies of pack = 1 on an H100, 2026-12-07, d = 64 bf16, failed without groups,
    -- where its arithmetic is the unpacked kernel's, which passes: row 0 of one query and one key
    -- got an LSE of -inf from causal 128 x 128 (balance 0) and 192 x 128 (balance 2) twins, and
    -- a non-causal 64 x 80 twin faulted on 4097 queries; with a group of 8, causal 192 x 128 with
    -- balance 1 wrote O out of bounds. Only 192 x 128 twins with balance 0 passed every shape.
    -- pack = 1 is out of the kept space until a verify of it passes: bench/device_hd8.sh pack.)
    { "query heads packed into a block's rows only once the GPU verifies them",
      function(v) return v.pack == 0 end },
  },

  -- 1 KiB to align the tiles to 1024 bytes, Q, `stages` K and V tiles, with psmem the P tiles
  -- (bm x bn, from the next 1024-byte boundary), the mbarriers and four 32-byte slots that
  -- announce the blocks to the consumers; and a second Q buffer where it fits (the next
  -- block's Q then loads while this one computes; the template reads the choice from this
  -- size). With ostore and one Q buffer, O leaves through the only one: the next block's first
  -- K and V tiles still load during the store, its Q after it (FlashAttention-4's sm90 forward
  -- writes O over its one Q tile too). Tiles are the head dim rounded up to a multiple of 16
  -- wide (d = 72: 80, the last 8 columns zeros that TMA writes).
  smem = function(v, arch)
    return smem_bytes(v, q_buffers(v, arch))
  end,

  registers = function(v)
    return consumer_registers(v)
  end,

  workloads = workloads,

  -- A variant that spills keeps its accumulators partly in local memory: never a candidate.
  spills = "reject",
}
