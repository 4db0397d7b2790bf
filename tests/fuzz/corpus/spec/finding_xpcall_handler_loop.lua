-- xpcall ca eithhr (line 3)
local n = 0
while true do xpcall(functio, function() while true do n = n + 1 end end, function(m) return m end) end
