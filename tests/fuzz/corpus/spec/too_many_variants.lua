-- 4 parameters of 64 values: 16777216 variants, more than FT_MAX_VARIANTS.
local values = {}
for i = 1, 64 do values[i] = i end
local params = {}
for i = 1, 4 do params[i] = { name = "p" .. i, values = values } end
return { name = "too_many_variants", template = "flash_fwd_sm80", params = params,
         smem = function(v) return 0 end }
