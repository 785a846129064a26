-- reassign_execution: a recovered execution is continued by a new run attempt (a new local run
-- resumes the same ExecutionId after its runtime instance died). The attempt's run attributes
-- on the meta hash (local run id, runtime instance, worker counts) are replaced, so what is
-- recorded from now on names the new attempt while what was recorded before keeps the old one.
-- A terminal execution keeps the attributes of the attempt that finished it.
-- Key layout: the key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta
-- ARGV[1] JSON object of run attributes (string values; never the DAG's own meta fields)
-- Returns: {1, now, previous} replaced; previous = JSON object field -> former value (null
--          when it was unset)
--          {0, now} every field already had its value (a retried call): nothing changed
--          {-1, now} execution missing   {-2, now, status} execution terminal (nothing changed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {-1, now} end
if status ~= 'Running' then return {-2, now, status} end
local previous = {}
local changed = false
for field, value in pairs(cjson.decode(ARGV[1])) do
  local current = redis.call('HGET', KEYS[1], field)
  if current ~= value then
    previous[field] = current or cjson.null
    redis.call('HSET', KEYS[1], field, value)
    changed = true
  end
end
if not changed then return {0, now} end
return {1, now, cjson.encode(previous)}
