return {
  name = "workload_float",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
  workloads = { { b = 4, hq = 16, hkv = 16, sq = 64.5, sk = 4096, d = 64 } },
}
