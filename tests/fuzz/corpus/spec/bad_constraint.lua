return {
  name = "bad_constraint",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  constraints = {
    { "fine", function(v) return true end },
    { "lacks its function" },
  },
  smem = function(v) return 0 end,
}
