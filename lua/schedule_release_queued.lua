-- schedule_release_queued: the waiting (queue_one) tick becomes the caller's claim, to fire now
-- that the previous run ended.
-- KEYS[1] schedule tick state HASH (see schedule_claim_tick)
-- ARGV[1] the waiting tick (epoch ms, as read)
-- ARGV[2] owner
-- ARGV[3] lease ms
-- Returns: {1, last_run}  claimed (kind 'queued'): fire it, then settle it
--          {0}            no such waiting tick any more, or another claim is pending: nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'queued', 'pending', 'last_run')
if s[1] ~= ARGV[1] or s[2] then return {0} end
redis.call('HDEL', KEYS[1], 'queued')
redis.call('HSET', KEYS[1], 'pending', ARGV[1], 'pending_owner', ARGV[2],
  'pending_until', now + tonumber(ARGV[3]), 'pending_kind', 'queued')
return {1, s[3] or ''}
