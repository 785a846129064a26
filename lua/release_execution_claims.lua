-- release_execution_claims: recovery of an in-flight execution whose runtime instance became
-- Unsafe. Steps the dead instance left Running (claimed before it was marked Unsafe) go back
-- to Ready at once instead of waiting for their lease: the claim token is cleared (a late
-- completion by the old owner is rejected), the retry count is NOT touched, a recovery is
-- counted. Claims made after the cutoff (a replacement's) are left alone.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] token
-- KEYS[6] recoveries
-- ARGV[1] cutoff ms: only steps claimed at or before it are released (the Unsafe mark time)
-- ARGV[2] lease ms the claims were made with (running score = claimed_at + lease)
-- Returns: {now, step...} the released step names (none when the execution is not Running)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
if redis.call('HGET', KEYS[1], 'status') ~= 'Running' then return out end
local deadline = tonumber(ARGV[1]) + tonumber(ARGV[2])
local claimed = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', deadline)
for _, name in ipairs(claimed) do
  redis.call('ZREM', KEYS[4], name)
  redis.call('HDEL', KEYS[5], name)
  redis.call('HSET', KEYS[2], name, 'Ready')
  redis.call('ZADD', KEYS[3], 0, name)
  redis.call('HINCRBY', KEYS[6], name, 1)
  table.insert(out, name)
end
return out
