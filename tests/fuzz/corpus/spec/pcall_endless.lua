-- pcall cannot swallow the instruction budget: the loop on line 3 still ends the load
local n = 0
while true do pcall(function() while true do n = n + 1 end end) end
