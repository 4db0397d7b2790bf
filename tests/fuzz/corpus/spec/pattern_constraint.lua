-- A constraint that runs the exponential pattern (line 8) for d = 128 only.
return {
  name = "pattern_constraint",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64, 128 } } },
  constraints = {
    { "d = 128 is matched by a bad pattern", function(v)
        return v.d == 64 or string.find(string.rep("a", 200), string.rep("a*", 15) .. "b") ~= nil
      end },
  },
  smem = function(v) return 0 end,
}
