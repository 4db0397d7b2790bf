-- spills takes "allow" or "reject".
return {
  name = "bad_spills",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
  spills = "sometimes",
}
