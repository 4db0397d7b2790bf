-- require takes modules of the spec's own folder and the built-in ones: a missing one is an error
local m = require("x")
