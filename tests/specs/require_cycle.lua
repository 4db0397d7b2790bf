-- req_cycle_a requires req_cycle_b, which requires req_cycle_a
local a = require("req_cycle_a")
