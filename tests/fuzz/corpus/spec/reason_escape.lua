-- A valid spec whose constraint prunes with a reason full of terminal controls, and whose
-- smem prints some: plan must show them as escapes, never send them to the terminal.
return {
  name = "reason_escape",
  template = "flash_fwd_sm80",
  params = {
    { name = "d", values = { 64 } },
    { name = "bm", values = { 64 } },
    { name = "bn", values = { 64 } },
    { name = "warps", values = { 4 } },
    { name = "stages", values = { 2 } },
    { name = "causal", values = { 0, 1 } },
    { name = "dtype", values = { "f16" } },
    { name = "qreg", values = { 0 } },
    { name = "overlap", values = { 0 } },
  },
  constraints = {
    { "causal\27[2J", function(v)
        print("checking\27]0;title\7")
        if v.causal == 1 then return false, "bad\27[31mred\rback" end
        return true
      end },
  },
  smem = function(v) return 0 end,
}
