-- bn = 10^6 would make the generator write a wgmma wrapper with half a million accumulators.
return {
  name = "wgmma_width",
  template = "flash_fwd_sm90",
  params = {
    { name = "d", values = { 64 } }, { name = "bm", values = { 128 } },
    { name = "bn", values = { 64, 1000000 } }, { name = "stages", values = { 2 } },
    { name = "causal", values = { 0 } }, { name = "dtype", values = { "f16" } },
    { name = "pingpong", values = { 0 } }, { name = "overlap", values = { 0 } },
    { name = "balance", values = { 0 } }, { name = "psmem", values = { 0 } }, { name = "pexp", values = { 0 } },
    { name = "skip_rescale", values = { 0 } }, { name = "ostore", values = { 0 } },
    { name = "early_rescale", values = { 0 } },
    { name = "ctas", values = { 1 } }, { name = "pack", values = { 0 } },
  },
  smem = function(v) return 0 end,
}
