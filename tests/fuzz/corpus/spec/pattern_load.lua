-- A pattern that backtracks exponentially, at load (line 3): "a*" fifteen times against 200
-- a's with no "b" to end on. Stock string.find never returns.
local hit = string.find(string.rep("a", 200), string.rep("a*", 15) .. "b")
return {
  name = "pattern_load",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
}
