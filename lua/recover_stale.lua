-- recover_stale: Running steps whose lease expired go back to Ready; the claim token is
-- cleared (a late completion by the old owner is then rejected), the retry count is NOT
-- touched, a recovery is counted.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] token
-- KEYS[6] recoveries
-- ARGV[1] max steps to recover
-- Returns: {now, step...} the recovered step names
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
if redis.call('HGET', KEYS[1], 'status') ~= 'Running' then return out end
local stale = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, name in ipairs(stale) do
  redis.call('ZREM', KEYS[4], name)
  redis.call('HDEL', KEYS[5], name)
  redis.call('HSET', KEYS[2], name, 'Ready')
  redis.call('ZADD', KEYS[3], 0, name)
  redis.call('HINCRBY', KEYS[6], name, 1)
  table.insert(out, name)
end
return out
