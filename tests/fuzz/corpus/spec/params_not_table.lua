return {
  name = "params_not_table",
  template = "flash_fwd_sm80",
  params = 5,
  smem = function(v) return 0 end,
}
