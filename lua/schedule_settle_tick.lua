-- schedule_settle_tick: the claimed tick was handled: it becomes the newest handled tick.
-- KEYS[1] schedule tick state HASH (see schedule_claim_tick)
-- ARGV[1] tick (epoch ms, as claimed)
-- ARGV[2] owner (as claimed)
-- ARGV[3] the run the tick made ('' when none)
-- ARGV[4] '1': the previous run is active and the overlap policy is queue_one: keep the tick waiting
-- Returns: 1  settled
--          2  settled; the tick now waits (queued) for the previous run to end
--          3  settled; another tick already waits, so this one is dropped
--          0  the claim is not the caller's any more (its lease ended and another scheduler took
--             it over): nothing changed
local s = redis.call('HMGET', KEYS[1], 'pending', 'pending_owner', 'fired', 'queued')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'pending', 'pending_owner', 'pending_until', 'pending_kind')
if tonumber(ARGV[1]) > tonumber(s[3] or '0') then redis.call('HSET', KEYS[1], 'fired', ARGV[1]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'last_run', ARGV[3]) end
if ARGV[4] == '1' then
  if s[4] then return 3 end
  redis.call('HSET', KEYS[1], 'queued', ARGV[1])
  return 2
end
return 1
