-- A negative integer would put '-' into the kernel's name.
return {
  name = "negative_value",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64, -64 } } },
  smem = function(v) return 0 end,
}
