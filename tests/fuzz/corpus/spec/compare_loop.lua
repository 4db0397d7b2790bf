-- Comparing two long strings is one instruction that reads 16 MiB (line 5): only the CPU time
-- limit sees it.
local a = string.rep("a", 1 << 24) .. "b"
local b = string.rep("a", 1 << 24) .. "c"
while true do local _ = a < b end
