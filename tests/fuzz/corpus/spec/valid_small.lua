-- A small valid spec: three parameters, two constraints, smem, registers, two workloads.
return {
  name = "small",
  template = "flash_fwd_sm80",
  description = "a small space for the unit tests",
  params = {
    { name = "d", values = { 64, 128 }, doc = "head dimension" },
    { name = "bm", values = { 64, 128, 256 } },
    { name = "dtype", values = { "f16", "bf16" } },
  },
  constraints = {
    { "bm is at most 128", function(v, arch) return v.bm <= 128 end },
    { "bf16 needs sm_80", function(v, arch)
        if v.dtype == "bf16" and arch.cc < 80 then
          return false, "bf16 needs cc >= 80 (got " .. arch.cc .. ")"
        end
        return true
      end },
  },
  smem = function(v, arch) return v.bm * v.d * 2 * 2 end,
  registers = function(v, arch) return 64 + v.d // 2 end,
  workloads = {
    { b = 4, hq = 16, hkv = 16, sq = 4096, sk = 4096, d = 128 },
    { b = 1, hq = 32, hkv = 8, sq = 1, sk = 8192, d = 64 },
  },
}
