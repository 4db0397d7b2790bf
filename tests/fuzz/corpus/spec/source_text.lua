-- Text that would be code if it reached the generated source: in the name, the description
-- and a doc. None of it may appear there.
return {
  name = "x */\n#error injected name\n// \\",
  template = "flash_fwd_sm80",
  description = "*/ #error injected description \"\\",
  params = {
    { name = "d", values = { 64 }, doc = "\n#define FTP_D 128 // injected doc" },
    { name = "bm", values = { 64 } }, { name = "bn", values = { 64 } },
    { name = "warps", values = { 4 } }, { name = "stages", values = { 2 } },
    { name = "causal", values = { 0 } }, { name = "dtype", values = { "f16" } },
    { name = "qreg", values = { 0 } }, { name = "overlap", values = { 0 } },
  },
  smem = function(v) return 0 end,
}
