return {
  name = "value_float",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64, 64.5 } } },
  smem = function(v) return 0 end,
}
