-- smem sums every numeric field of arch; the constraint keeps only sm_90.
return {
  name = "arch_fields",
  template = "flash_fwd_sm80",
  params = { { name = "x", values = { 1 } } },
  constraints = {
    { "needs sm_90", function(v, arch)
        if arch.name ~= "sm_90" then return false, "arch.name is " .. arch.name end
        return true
      end },
  },
  smem = function(v, arch)
    return arch.cc + arch.sms + arch.smem_per_block + arch.smem_per_sm + arch.regs_per_sm
      + arch.regs_per_thread + arch.threads_per_block + arch.threads_per_sm
  end,
}
