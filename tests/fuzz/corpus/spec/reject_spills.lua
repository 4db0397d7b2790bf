-- Two flash_fwd variants for sm_80: d=64 with Q from shared memory (no spills), and d=256 with
-- Q's fragments in registers and bn=32 (ptxas spills about 150 bytes), with spills = "reject".
return {
  name = "reject_spills",
  template = "flash_fwd_sm80",
  params = {
    { name = "d",       values = { 64, 256 } },
    { name = "bm",      values = { 64 } },
    { name = "bn",      values = { 32, 64 } },
    { name = "warps",   values = { 4 } },
    { name = "stages",  values = { 2 } },
    { name = "causal",  values = { 0 } },
    { name = "dtype",   values = { "f16" } },
    { name = "qreg",    values = { 0, 1 } },
    { name = "overlap", values = { 0 } },
  },
  constraints = {
    { "only the two variants of the test",
      function(v) return (v.d == 64 and v.bn == 64 and v.qreg == 0) or (v.d == 256 and v.bn == 32 and v.qreg == 1) end },
  },
  -- as specs/flash_fwd.lua (the template checks it)
  smem = function(v) return (v.bm + 2 * v.stages * v.bn) * (v.d + 8) * 2 end,
  spills = "reject",
}
