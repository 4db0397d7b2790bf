-- nor can a message handler that loops: the sandbox's error does not run it (line 3)
local n = 0
local ok = xpcall(error, function() while true do n = n + 1 end end, "boom")
return ok
