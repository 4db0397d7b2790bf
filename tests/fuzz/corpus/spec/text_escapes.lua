-- Text with control characters everywhere a spec gives text that users see: the name, the
-- description, a doc, a constraint's text, a reason a constraint returns, print, an error.
return {
  name = "escapes\n\27[2J",
  template = "flash_fwd_sm80",
  description = "clears\27[2J the screen",
  params = {
    { name = "d", values = { 64, 128 }, doc = "head\nzebra\0hidden" },
    { name = "mode", values = { "keep", "reason", "error", "print" } },
  },
  constraints = {
    { "text\nwith a newline", function(v) return v.d == 64 end },
    { "never shown", function(v)
        if v.mode == "reason" then return false, "bad\27[31mred\rback\0nul" end
        return true
      end },
  },
  smem = function(v)
    if v.mode == "error" then error("boom\27]0;title\7") end                   -- line 19
    if v.mode == "print" then print("printed\27[2J", "\n") end
    return 0
  end,
}
