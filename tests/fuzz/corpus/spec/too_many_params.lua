-- 25 parameters: one more than FT_MAX_PARAMS.
local params = {}
for i = 1, 25 do params[i] = { name = "p" .. i, values = { 1 } } end
return { name = "too_many_params", template = "flash_fwd_sm80", params = params,
         smem = function(v) return 0 end }
