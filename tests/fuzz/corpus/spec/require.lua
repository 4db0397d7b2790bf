-- require is removed
local m = require("x")
