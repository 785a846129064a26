-- task_transition: move an MCP task to the status its run maps to now (or to 'cancelled').
-- working <-> input_required; either -> completed | failed | cancelled; a terminal status
-- never changes again (so a cancelled task stays cancelled even if its run completes).
-- The task keeps the TTL it was created with.
-- KEYS[1] task  HASH  (see task_create)
-- ARGV[1] the new status
-- Returns: {1, now, status, last_updated_at_ms}  moved to ARGV[1]
--          {2, now, status, last_updated_at_ms}  already in ARGV[1]: nothing changed
--          {3, now, status, last_updated_at_ms}  already terminal: refused, nothing changed
--          {-1, now}                             no such task (expired or never created)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('HMGET', KEYS[1], 'status', 'last_updated_at_ms')
if not current[1] then return {-1, now} end
if current[1] == ARGV[1] then return {2, now, current[1], tonumber(current[2])} end
if current[1] == 'completed' or current[1] == 'failed' or current[1] == 'cancelled' then
  return {3, now, current[1], tonumber(current[2])}
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'last_updated_at_ms', now)
return {1, now, ARGV[1], now}
