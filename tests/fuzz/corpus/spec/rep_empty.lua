-- string.rep of nothing, 2^60 times: stock Lua copies nothing 2^60 times. Here it is "" at
-- once, and the spec loads.
local a = string.rep("", 1 << 60)
local b = string.rep("", 1 << 60, "")
return {
  name = "rep_empty" .. a .. b,
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return #string.rep("", 1 << 62) end,
}
