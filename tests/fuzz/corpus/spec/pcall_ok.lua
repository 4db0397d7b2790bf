-- pcall, xpcall, setmetatable and print still work for ordinary code.
local ok1, msg1 = pcall(error, "boom", 0)
local ok2, msg2 = xpcall(function() error("bang", 0) end, function(m) return "handled " .. m end)
local ok3, a, b = pcall(function(x, y) return x + y, x * y end, 3, 4)
local t = setmetatable({}, { __index = function(_, k) return k .. "!" end })
print("pcall_ok.lua: print writes to stderr", ok1, msg1, nil, 1.5)
return {
  name = table.concat({ tostring(ok1), msg1, tostring(ok2), msg2, tostring(ok3), a, b, t.hi }, ","),
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v) return 0 end,
}
