-- xpcall cannot swallow the instruction budget either (line 3)
local n = 0
while true do xpcall(function() while true do n = n + 1 end end, function(m) return m end) end
