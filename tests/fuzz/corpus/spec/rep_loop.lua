-- 16 MiB strings made and dropped without end (line 3): live memory stays under the cap,
-- the allocation budget ends it.
for _ = 1, 1e9 do local s = string.rep("x", 1 << 24) end
return {}
