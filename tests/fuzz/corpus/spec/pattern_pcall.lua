-- The same pattern inside pcall (line 4): the budget is not an error the spec can catch.
local subject, pattern = string.rep("a", 200), string.rep("a*", 15) .. "b"
for _ = 1, 3 do
  local ok = pcall(string.match, subject, pattern)
end
return {
  name = "pattern_pcall",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
}
