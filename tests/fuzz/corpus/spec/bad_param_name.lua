return {
  name = "bad_param_name",
  template = "flash_fwd_sm80",
  params = { { name = "block-m", values = { 64 } } },
  smem = function(v) return 0 end,
}
