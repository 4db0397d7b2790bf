-- one terabyte: string.rep refuses it itself, before allocating (line 2)
local s = string.rep("x", 1 << 40)
return {}
