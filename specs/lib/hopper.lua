-- What the warp-specialised Hopper specs share: `require("hopper")` in a spec.
--
-- consumer_register_limit(n): the registers each thread of n consumer warpgroups may use, as
-- the templates split a 64K register file with setmaxnreg: one consumer warpgroup keeps the
-- launch's 255; with two the producer warpgroup drops to 24 and the consumers rise to 240;
-- with three, 160 each (templates/flash_fwd_sm90.cuh, templates/flash_bwd_sm90.cuh). With
-- `ctas` = 2 CTAs of one consumer warpgroup sharing a multiprocessor (the forward's `ctas`),
-- each launches at 128 a thread and the producer's 104 go to the consumer: 232.
local function consumer_register_limit(n, ctas)
  if n == 1 and ctas == 2 then return 232 end
  if n == 1 then return 255 end
  if n == 2 then return 240 end
  return 160
end

return { consumer_register_limit = consumer_register_limit }
