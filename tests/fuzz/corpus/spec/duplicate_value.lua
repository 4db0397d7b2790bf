return {
  name = "duplicate_value",
  template = "flash_fwd_sm80",
  params = { { name = "bm", values = { 64, 128, 64 } } },
  smem = function(v) return 0 end,
}
