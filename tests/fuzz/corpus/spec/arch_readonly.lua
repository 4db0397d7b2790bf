-- arch is a read-only view: writing fails (line 8), pairs sees its fields, rawset is undone.
return {
  name = "arch_readonly",
  template = "flash_fwd_sm80",
  params = { { name = "mode", values = { "count", "write", "rawset" } } },
  smem = function(v, arch)
    if v.mode == "write" then
      arch.cc = 0
    end
    if v.mode == "rawset" then rawset(arch, "cc", 0) return arch.cc end
    local n = 0
    for k, x in pairs(arch) do n = n + 1 end
    return n * 1000 + arch.cc
  end,
}
