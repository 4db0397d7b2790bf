-- A module for require_cycle.lua.
return require("req_cycle_b")
