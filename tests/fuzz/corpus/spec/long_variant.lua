-- Eight parameters of 63-character names and values: variant strings of 1023 characters.
local params = {}
for i = 1, 8 do
  local name = string.rep(string.char(96 + i), 63)
  params[i] = { name = name, values = { string.rep("v", 62) .. i } }
end
return {
  name = "long_variant",
  template = "flash_fwd_sm80",
  params = params,
  smem = function(v) return 0 end,
}
