return {
  name = "registers_not_function",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
  registers = "many",
}
