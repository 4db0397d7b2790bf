-- pcall cannot swallow the memory cap: the allocation on line 4 still ends the load
local ok = pcall(function()
  local t = {}
  while true do t[#t + 0] = string.rep("x", 1 << 20) end
end)
return { name = "x", template = "flash_fwd_sm80", params = { { name = "d", values = { 64 } } },
         smem = function(v) return 0 end }
