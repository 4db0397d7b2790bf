-- smem allocates without end on line 8, a MiB a step (the cap comes before the CPU-time limit).
return {
  name = "memory_constraint",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v)
    local t = {}
    while true do t[#t + 1] = string.rep("y", 1 << 20) .. #t end
  end,
}
