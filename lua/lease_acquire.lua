-- lease_acquire: take one concurrency lease in every scope ZSET, all or nothing.
--
-- KEYS[1..n]    scope ZSETs (member = lease id, score = expiry in Unix ms); one hash tag. Every
--               scope has its own tag, so the gate calls this once per scope (in one
--               pipeline) and releases the granted scopes when one refuses.
-- ARGV[1]       lease id
-- ARGV[2]       lease duration in ms
-- ARGV[3..n+2]  limit of KEYS[i] is ARGV[i+2]
--
-- Returns {1, expires_at_ms}          acquired in every scope
--         {0, index, current, limit}  KEYS[index] is full; no lease was added anywhere
--
-- Expired leases are evicted first (ZREMRANGEBYSCORE -inf now), so a crashed holder frees
-- its slot on the next acquisition. Re-acquiring with a lease id already held in a scope is
-- not counted against that scope's limit (an idempotent retry of a lost reply).
-- Time comes from redis TIME only.

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lease_id = ARGV[1]
local lease_ms = tonumber(ARGV[2])

for index, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local current = redis.call('ZCARD', key)
  local limit = tonumber(ARGV[index + 2])
  if current >= limit and not redis.call('ZSCORE', key, lease_id) then
    return {0, index, current, limit}
  end
end

local expires_at = now + lease_ms
local key_ttl_ms = lease_ms * 2
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, expires_at, lease_id)
  if redis.call('PTTL', key) < key_ttl_ms then
    redis.call('PEXPIRE', key, key_ttl_ms)
  end
end
return {1, expires_at}
