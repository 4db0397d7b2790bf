-- Library functions that loop in C, one per value of fn, inside smem (line numbers below are
-- those the tests expect): each must end with the instruction budget (table functions, byte)
-- or the pattern matching budget (a plain find) instead of running for hours.
local huge = setmetatable({}, { __len = function() return 1 << 50 end })
return {
  name = "library_loops",
  template = "flash_fwd_sm80",
  params = { { name = "fn", values = { "move", "insert", "remove", "concat", "unpack",
                                       "sort_c", "sort_strings", "byte", "find_plain" } } },
  smem = function(v)
    local t = {}
    if v.fn == "move" then table.move({}, 1, 1 << 50, 1, {}) end                   -- line 12
    if v.fn == "insert" then table.insert(huge, 1, 0) end                           -- line 13
    if v.fn == "remove" then table.remove(huge, 1) end                              -- line 14
    if v.fn == "concat" then
      for i = 1, 100000 do t[i] = "" end
      while true do table.concat(t) end                                            -- line 17
    end
    if v.fn == "unpack" then
      while true do select("#", table.unpack(t, 1, 100000)) end                    -- line 20
    end
    if v.fn == "sort_c" then
      for i = 1, 100000 do t[i] = i end
      while true do table.sort(t, math.ult) end                                    -- line 24
    end
    if v.fn == "sort_strings" then
      local s = string.rep("a", 1 << 20)
      for i = 1, 1000 do t[i] = s end
      while true do table.sort(t) end                                              -- line 29
    end
    if v.fn == "byte" then
      local s = string.rep("a", 100000)
      while true do string.byte(s, 1, -1) end                                      -- line 33
    end
    if v.fn == "find_plain" then
      local s, p = string.rep("a", 1 << 20), string.rep("a", 1 << 19) .. "b"
      while true do string.find(s, p, 1, true) end                                 -- line 37
    end
    return 0
  end,
}
