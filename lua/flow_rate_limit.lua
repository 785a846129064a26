-- flow_rate_limit: take one unit from a provider key's rate limit before a step calls the
-- provider, or refuse (the step then waits; no attempt is spent). See lib/gcra.
-- Key layout: one budget per hash tag ({flow-rate:<budget name>}): budgets spread over a
-- Redis Cluster's slots.
-- KEYS[1] rates  HASH  field -> theoretical arrival time, µs of the server clock
-- ARGV[1] JSON array of cells [field, interval_us, tolerance_us] (all taken, or none)
-- Returns: {1, 0}                taken
--          {0, wait_us, field}   refused: `field` conforms again in `wait_us`; nothing taken
local RATES = 1
-- include: gcra
local refused = gcra_take(cjson.decode(ARGV[1]), redis.call('TIME'))
if refused == 0 then return {1, 0} end
return {0, refused[1], refused[2]}
