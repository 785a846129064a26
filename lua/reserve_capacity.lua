-- reserve_capacity: hold one run slot of a runtime instance for a shared run, with a TTL,
-- so concurrent dispatchers that read the same published capacity cannot both take the
-- last slot. Expired reservations are evicted before counting; a crashed dispatcher's
-- reservation frees itself when its TTL passes.
-- Key layout: both keys live under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] capacity      HASH  published by publish_capacity: can_accept_run (1/0),
--                             available_run_slots, heartbeat_at_ms, incarnation
-- KEYS[2] reservations  ZSET  holder (shared run id) -> expires-at ms
-- ARGV[1] holder   ARGV[2] ttl ms   ARGV[3] heartbeat age (ms) after which capacity is stale
-- A reservation belongs to the incarnation that published the capacity (a new incarnation
-- drops its predecessor's reservations): it is returned so the dispatch can name it.
-- Returns: {1, now, expires_at, incarnation}  reserved
--          {2, now, expires_at, incarnation}  already held by this holder (TTL refreshed)
--          {0, now, held}        every available run slot is reserved
--          {-1, now}             no capacity published for this instance
--          {-2, now}             capacity heartbeat is stale
--          {-3, now}             instance does not accept runs (paused, saturated)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = redis.call('HMGET', KEYS[1], 'can_accept_run', 'available_run_slots', 'heartbeat_at_ms',
  'incarnation')
if not cap[3] then return {-1, now} end
if now - tonumber(cap[3]) > tonumber(ARGV[3]) then return {-2, now} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local expires_at = now + tonumber(ARGV[2])
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], expires_at, ARGV[1])
  return {2, now, expires_at, cap[4] or ''}
end
if cap[1] ~= '1' then return {-3, now} end
local held = redis.call('ZCARD', KEYS[2])
if held >= tonumber(cap[2]) then return {0, now, held} end
redis.call('ZADD', KEYS[2], expires_at, ARGV[1])
return {1, now, expires_at, cap[4] or ''}
