-- __gc would run with hooks off, beyond any budget
local t = setmetatable({}, { __gc = function() while true do end end })
