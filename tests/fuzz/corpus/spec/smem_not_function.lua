return {
  name = "smem_not_function",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = 49152,
}
