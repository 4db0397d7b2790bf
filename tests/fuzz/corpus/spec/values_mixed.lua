return {
  name = "values_mixed",
  template = "flash_fwd_sm80",
  params = { { name = "dtype", values = { "f16", 16 } } },
  smem = function(v) return 0 end,
}
