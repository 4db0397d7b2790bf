-- load is removed
local f = load("return 1")
