-- smem runs each pattern function on the exponential pattern (lines 9 to 12), chosen by v.fn.
return {
  name = "pattern_smem",
  template = "flash_fwd_sm80",
  params = { { name = "fn", values = { "find", "match", "gmatch", "gsub" } } },
  smem = function(v)
    local s, p = string.rep("a", 200), string.rep("a*", 15) .. "b"
    local n = 0
    if v.fn == "find" then n = string.find(s, p) or 0 end
    if v.fn == "match" then n = #(s:match(p) or "") end
    if v.fn == "gmatch" then for m in s:gmatch(p) do n = n + 1 end end
    if v.fn == "gsub" then n = select(2, s:gsub(p, "x")) end
    return n
  end,
}
