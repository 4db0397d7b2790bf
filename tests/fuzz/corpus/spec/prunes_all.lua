-- A valid spec whose constraints keep nothing: plan must say so and fail.
return {
  name = "prunes_all",
  template = "flash_fwd_sm80",
  params = {
    { name = "d", values = { 64 } },
    { name = "bm", values = { 64 } },
    { name = "bn", values = { 64 } },
    { name = "warps", values = { 4 } },
    { name = "stages", values = { 2 } },
    { name = "causal", values = { 0, 1 } },
    { name = "dtype", values = { "f16" } },
    { name = "qreg", values = { 0 } },
    { name = "overlap", values = { 0 } },
  },
  constraints = {
    { "nothing is ever good enough", function(v) return false end },
  },
  smem = function(v) return 0 end,
}
