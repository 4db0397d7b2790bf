-- Workloads the built-in specs share: `require("workloads")` in a spec.
--
-- paper_grid(long_dims, short_dims): the FlashAttention-2/3 papers' grid — 16k tokens per batch
-- and hidden size 2048, so batch = 16384 / seqlen and heads = 2048 / head_dim — at sequence
-- lengths 512 to 16384 for the head dims of long_dims, and at 1024 and 4096 for those of
-- short_dims. One workload per (head dim, sequence length), in that order.
local function paper_grid(long_dims, short_dims)
  local workloads = {}
  local function grid(d, seqlens)
    for _, s in ipairs(seqlens) do
      local heads = 2048 // d
      workloads[#workloads + 1] = { b = 16384 // s, hq = heads, hkv = heads, sq = s, sk = s, d = d }
    end
  end
  for _, d in ipairs(long_dims) do
    grid(d, { 512, 1024, 2048, 4096, 8192, 16384 })
  end
  for _, d in ipairs(short_dims) do
    grid(d, { 1024, 4096 })
  end
  return workloads
end

-- grouped(dims, seqlens, group): the same grid's shapes with `group` query heads per K/V head
-- (grouped-query attention), at the given head dims and sequence lengths: where a kernel's
-- handling of groups matters (the backward's gqa knob), a tune then measures it.
local function grouped(dims, seqlens, group)
  local workloads = {}
  for _, d in ipairs(dims) do
    for _, s in ipairs(seqlens) do
      local heads = 2048 // d
      if heads % group ~= 0 then
        error(string.format("grouped: %d heads at d = %d are no multiple of a group of %d", heads, d, group))
      end
      workloads[#workloads + 1] = { b = 16384 // s, hq = heads, hkv = heads // group, sq = s, sk = s, d = d }
    end
  end
  return workloads
end

-- The workloads of every list given, in order.
local function concat(...)
  local all = {}
  for _, list in ipairs({ ... }) do
    for _, w in ipairs(list) do
      all[#all + 1] = w
    end
  end
  return all
end

return { paper_grid = paper_grid, grouped = grouped, concat = concat }
