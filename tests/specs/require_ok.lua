-- A spec that requires a module of its own folder (req_values.lua) and a built-in one
-- (specs/lib/workloads.lua).
local values = require("req_values")
assert(require("req_values") == values, "a module runs once: require gives the same value")
local workloads = require("workloads").paper_grid({ 64 }, {})
return {
  name = "require_ok",
  template = "flash_fwd_sm80",
  params = {
    { name = "d", values = values.head_dims },
    { name = "bm", values = { 64 } },
    { name = "dtype", values = { "f16" } },
  },
  smem = function(v) return v.bm * v.d * 4 end,
  workloads = workloads,
}
