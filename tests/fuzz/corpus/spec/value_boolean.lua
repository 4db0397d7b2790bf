return {
  name = "value_boolean",
  template = "flash_fwd_sm80",
  params = {
    { name = "d", values = { 64, 128 } },
    { name = "bm", values = { 64, 128, true } },
  },
  smem = function(v) return 0 end,
}
