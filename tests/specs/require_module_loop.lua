-- a module that never returns: the spec's instruction budget ends it, naming the module
local m = require("req_loop")
