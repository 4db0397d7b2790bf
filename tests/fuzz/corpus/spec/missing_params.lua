return {
  name = "missing_params",
  template = "flash_fwd_sm80",
  smem = function(v) return 0 end,
}
