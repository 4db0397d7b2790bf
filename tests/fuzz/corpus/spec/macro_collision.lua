-- The integer parameter 'dtype_f16' and the value 'f16' of 'dtype' both become FTP_DTYPE_F16.
return {
  name = "macro_collision",
  template = "flash_fwd_sm80",
  params = {
    { name = "dtype", values = { "f16", "bf16" } },
    { name = "dtype_f16", values = { 0, 1 } },
  },
  smem = function(v) return 0 end,
}
