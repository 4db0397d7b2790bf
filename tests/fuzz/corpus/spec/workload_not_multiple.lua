return {
  name = "workload_not_multiple",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
  workloads = {
    { b = 4, hq = 16, hkv = 16, sq = 4096, sk = 4096, d = 64 },
    { b = 4, hq = 16, hkv = 3, sq = 4096, sk = 4096, d = 64 },
  },
}
