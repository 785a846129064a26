-- release_step: Running -> Ready for the current token holder without consuming retry
-- budget (the step parked for human input, or its concurrency lease could not be held).
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] token
-- ARGV[1] step   ARGV[2] claim token   ARGV[3] eligible-after delay ms (0 = now)
-- Returns: {1, now} released | {0, now} token mismatch | {-2, now, status} not Running
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local name = ARGV[1]
local status = redis.call('HGET', KEYS[2], name)
if status ~= 'Running' then return {-2, now, status or ''} end
if redis.call('HGET', KEYS[5], name) ~= ARGV[2] then return {0, now} end
redis.call('HDEL', KEYS[5], name)
redis.call('ZREM', KEYS[4], name)
redis.call('HSET', KEYS[2], name, 'Ready')
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), name)
return {1, now}
