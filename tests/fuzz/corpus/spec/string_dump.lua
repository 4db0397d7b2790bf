-- string.dump is removed
local s = string.dump(print)
