-- smem, registers and a constraint that return the wrong things, depending on mode.
return {
  name = "bad_returns",
  template = "flash_fwd_sm80",
  params = { { name = "mode", values = { "neg", "float", "str", "ok", "integral_float" } } },
  constraints = {
    { "returns a number for float", function(v)
        if v.mode == "float" then return 1 end
        if v.mode == "neg" then return nil end
        return true
      end },
  },
  smem = function(v)
    if v.mode == "neg" then return -1 end
    if v.mode == "float" then return 1.5 end
    if v.mode == "str" then return "12" end
    if v.mode == "integral_float" then return 2.0 ^ 14 end
    return 4096
  end,
  registers = function(v)
    if v.mode == "ok" then return 96 end
  end,
}
