-- The constraint loops forever (line 8) for d = 128 only.
return {
  name = "endless_constraint",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64, 128 } } },
  constraints = {
    { "terminates for d = 64", function(v)
        while v.d == 128 do end
        return true
      end },
  },
  smem = function(v) return 0 end,
}
