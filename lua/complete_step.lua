-- complete_step: Running -> Completed for the current claim-token holder only; releases
-- dependents whose last dependency this was.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] pending  KEYS[4] children  KEYS[5] ready
-- KEYS[6] running  KEYS[7] token  KEYS[8] result
-- ARGV[1] step   ARGV[2] claim token   ARGV[3] result (JSON text)
-- Returns: {1, now, converged, released}  completed; converged=1 when nothing is ready or
--                                          running; released = dependents it made Ready
--          {0, now} token mismatch (stale owner): nothing changed
--          {-1, now} execution missing   {-2, now, step_status} step not Running
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, now} end
local name = ARGV[1]
local status = redis.call('HGET', KEYS[2], name)
if status ~= 'Running' then return {-2, now, status or ''} end
if redis.call('HGET', KEYS[7], name) ~= ARGV[2] then return {0, now} end
redis.call('HSET', KEYS[2], name, 'Completed')
redis.call('HDEL', KEYS[7], name)
redis.call('ZREM', KEYS[6], name)
redis.call('HSET', KEYS[8], name, ARGV[3])
redis.call('HINCRBY', KEYS[1], 'completed_count', 1)
local released = 0
for _, child in ipairs(cjson.decode(redis.call('HGET', KEYS[4], name) or '[]')) do
  if redis.call('HINCRBY', KEYS[3], child, -1) == 0 and redis.call('HGET', KEYS[2], child) == 'Pending' then
    redis.call('HSET', KEYS[2], child, 'Ready')
    redis.call('ZADD', KEYS[5], 0, child)
    released = released + 1
  end
end
local converged = 0
if redis.call('ZCARD', KEYS[5]) == 0 and redis.call('ZCARD', KEYS[6]) == 0 then converged = 1 end
return {1, now, converged, released}
