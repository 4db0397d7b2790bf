-- 'd' and 'D' both become FTP_D in the generated source.
return {
  name = "name_collision",
  template = "flash_fwd_sm80",
  params = {
    { name = "d", values = { 64 } },
    { name = "bm", values = { 64 } },
    { name = "D", values = { 128 } },
  },
  smem = function(v) return 0 end,
}
