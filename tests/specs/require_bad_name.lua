-- require takes module names, never paths
local m = require("../../specs/flash_fwd")
