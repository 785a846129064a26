-- create_execution: create the hot DAG state of one execution, exactly once.
-- KEYS[1] meta      HASH  execution record
-- KEYS[2] status    HASH  step -> Pending|Ready
-- KEYS[3] pending   HASH  step -> number of dependencies not yet Completed
-- KEYS[4] children  HASH  step -> JSON array of dependent step names
-- KEYS[5] ready     ZSET  step -> eligible-at (ms); 0 = claimable now
-- KEYS[6] needs     HASH  step -> JSON array of steps whose results its bindings read
-- KEYS[7] fenced    STRING set by fence_execution: recovery gave this ExecutionId up
-- ARGV[1] JSON object of meta fields (string values)
-- ARGV[2] JSON array of {name, deps:[...], children:[...], needs:[...]}
-- Returns: {1, now_ms} created | {0, now_ms} already exists (nothing changed)
--          {-1, now_ms, reason} fenced: the ExecutionId may never be created (nothing changed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fenced = redis.call('GET', KEYS[7])
if fenced then return {-1, now, fenced} end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, now}
end
local meta = cjson.decode(ARGV[1])
for field, value in pairs(meta) do
  redis.call('HSET', KEYS[1], field, value)
end
local steps = cjson.decode(ARGV[2])
redis.call('HSET', KEYS[1], 'status', 'Running', 'created_at_ms', now, 'step_count', #steps,
  'completed_count', 0, 'claim_seq', 0)
for _, step in ipairs(steps) do
  local ndeps = #step.deps
  redis.call('HSET', KEYS[3], step.name, ndeps)
  redis.call('HSET', KEYS[4], step.name, cjson.encode(step.children))
  redis.call('HSET', KEYS[6], step.name, cjson.encode(step.needs))
  if ndeps == 0 then
    redis.call('HSET', KEYS[2], step.name, 'Ready')
    redis.call('ZADD', KEYS[5], 0, step.name)
  else
    redis.call('HSET', KEYS[2], step.name, 'Pending')
  end
end
return {1, now}
