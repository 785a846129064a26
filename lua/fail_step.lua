-- fail_step: Running -> WaitingForRetry (retry count + 1, eligible at now + delay) or
-- Running -> Failed, for the current claim-token holder only. The step's error record is
-- kept with the server time of the failure (`at_ms`), so status views say when it failed.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] token
-- KEYS[6] retries  KEYS[7] error  KEYS[8] assistants (ZSET assistant -> lease-until ms)
-- ARGV[1] step   ARGV[2] claim token   ARGV[3] 'retry' | 'fail'   ARGV[4] retry delay ms
-- ARGV[5] error (a JSON object: code, message, reason)
-- ARGV[6] claimer ('' or absent: the token alone decides; '@<assistant>': refused once that
--         assisting instance's lease lapsed, see lib/assistant_lease)
-- Returns: {1, now, converged, retry_count, next_retry_at_ms}  applied
--          {0, now} token mismatch (stale owner, or an assistant whose lease lapsed): nothing changed
--          {-1, now} execution missing   {-2, now, step_status} step not Running
local ASSISTANTS = 8
-- include: assistant_lease
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, now} end
local name = ARGV[1]
local status = redis.call('HGET', KEYS[2], name)
if status ~= 'Running' then return {-2, now, status or ''} end
if assistant_refusal(ARGV[6] or '', now) or redis.call('HGET', KEYS[5], name) ~= ARGV[2] then
  return {0, now}
end
redis.call('HDEL', KEYS[5], name)
redis.call('ZREM', KEYS[4], name)
local error = cjson.decode(ARGV[5])
error['at_ms'] = now
redis.call('HSET', KEYS[7], name, cjson.encode(error))
local retries = tonumber(redis.call('HGET', KEYS[6], name) or '0')
local next_at = 0
if ARGV[3] == 'retry' then
  retries = redis.call('HINCRBY', KEYS[6], name, 1)
  next_at = now + tonumber(ARGV[4])
  redis.call('HSET', KEYS[2], name, 'WaitingForRetry')
  redis.call('ZADD', KEYS[3], next_at, name)
else
  redis.call('HSET', KEYS[2], name, 'Failed')
end
local converged = 0
if redis.call('ZCARD', KEYS[3]) == 0 and redis.call('ZCARD', KEYS[4]) == 0 then converged = 1 end
return {1, now, converged, retries, next_at}
