-- allocates without end on line 3
local t = {}
while true do t[#t + 1] = string.rep("x", 1 << 20) end
