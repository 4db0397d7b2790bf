-- indexes a nil value on line 3
local x = nil
local y = x.field
return {}
