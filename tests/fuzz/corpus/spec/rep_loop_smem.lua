-- The same inside smem (line 7): a call has an allocation budget of its own.
return {
  name = "rep_loop_smem",
  template = "flash_fwd_sm80",
  params = { { name = "d", values = { 64 } } },
  smem = function(v)
    for _ = 1, 1e9 do local s = ("x"):rep(1 << 22, "y") end
    return 0
  end,
}
