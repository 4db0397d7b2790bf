-- The second constraint indexes a number on line 8.
return {
  name = "constraint_error",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64, 128 } } },
  constraints = {
    { "fine", function(v) return true end },
    { "broken", function(v)
        return v.d.x > 0
      end },
  },
  smem = function(v) return 0 end,
}
