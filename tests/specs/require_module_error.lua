-- an error in a module names the module's file and line
local m = require("req_error")
