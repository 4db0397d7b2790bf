-- 65 values: one more than FT_MAX_VALUES.
local values = {}
for i = 1, 65 do values[i] = i end
return { name = "too_many_values", template = "flash_fwd_sm80",
         params = { { name = "x", values = values } }, smem = function(v) return 0 end }
