return {
  name = "bad_string_value",
  template = "flash_fwd_sm80",
  params = { { name = "dtype", values = { "f16", "bf 16" } } },
  smem = function(v) return 0 end,
}
