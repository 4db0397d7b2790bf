return {
  name = "duplicate_param",
  template = "flash_fwd_sm80",
  params = {
    { name = "d", values = { 64 } },
    { name = "bm", values = { 64 } },
    { name = "d", values = { 128 } },
  },
  smem = function(v) return 0 end,
}
