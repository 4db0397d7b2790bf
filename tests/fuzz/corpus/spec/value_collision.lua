-- The values 'f16' and 'F16' both become FTP_DTYPE_F16.
return {
  name = "value_collision",
  template = "flash_fwd_sm80",
  params = { { name = "dtype", values = { "f16", "bf16", "F16" } } },
  smem = function(v) return 0 end,
}
