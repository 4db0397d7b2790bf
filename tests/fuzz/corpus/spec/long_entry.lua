-- Variant strings that fit (at most 511 characters), kernel names that do not (255): the
-- template's parameters plus four of 40-character names and values.
local params = {
  { name = "d", values = { 64 } }, { name = "bm", values = { 64 } },
  { name = "bn", values = { 64 } }, { name = "warps", values = { 4 } },
  { name = "stages", values = { 1 } }, { name = "causal", values = { 0 } },
  { name = "dtype", values = { "f16" } }, { name = "qreg", values = { 0 } },
  { name = "overlap", values = { 0 } },
}
for i = 1, 4 do
  params[#params + 1] = { name = string.rep(string.char(96 + i), 40), values = { string.rep("v", 40) } }
end
return {
  name = "long_entry",
  template = "flash_fwd_sm80",
  params = params,
  smem = function(v) return 0 end,
}
