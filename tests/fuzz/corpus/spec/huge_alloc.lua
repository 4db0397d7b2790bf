-- asks for one gibibyte at once on line 2 (under string.rep's own limit of INT_MAX)
local s = string.rep("x", 1 << 30)
return {}
