return {
  name = "unknown_field",
  template = "flash_fwd_sm80",
  parms = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
}
