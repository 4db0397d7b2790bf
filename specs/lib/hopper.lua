-- What the warp-specialised Hopper specs share: `require("hopper")` in a spec.
--
-- consumer_register_limit(n): the registers each thread of n consumer warpgroups may use, as
-- the templates split a 64K register file with setmaxnreg: one consumer warpgroup keeps the
-- launch's 255; with two the producer warpgroup drops to 24 and the consumers rise to 240;
-- with three, 160 each (templates/flash_fwd_sm90.cuh, templates/flash_bwd_sm90.cuh).
local function consumer_register_limit(n)
  if n == 1 then return 255 end
  if n == 2 then return 240 end
  return 160
end

return { consumer_register_limit = consumer_register_limit }
