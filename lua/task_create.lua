-- task_create: record a new MCP task, status 'working', that Redis deletes when its TTL ends.
-- Key layout: the task hash lives under the task's own hash tag {task_<id>}.
-- KEYS[1] task  HASH  task_id, tenant_id, user_id, tool, run_id, origin (JSON), ttl_ms,
--                     poll_interval_ms, status, created_at_ms, last_updated_at_ms
-- ARGV[1] ttl ms   ARGV[2..n] field, value pairs of the record (everything but status and
--                  the two timestamps, which this script sets from the server clock)
-- Returns: {1, now}  created (expires at now + ttl)
--          {0, now}  a task with this id exists already: nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, now} end
redis.call('HSET', KEYS[1], 'status', 'working', 'created_at_ms', now, 'last_updated_at_ms', now,
  unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {1, now}
