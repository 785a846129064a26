-- create_execution: create the hot DAG state of one execution, exactly once, and (when asked:
-- the local run that creates it advances it next) claim its first claimable steps in the same
-- call, exactly as advance_steps claims them, so a one-step run's step is created and claimed
-- in one round trip. Claims are made only by the call that creates the DAG, and none while
-- the execution has a control status.
-- KEYS[1] meta      HASH  execution record
-- KEYS[2] status    HASH  step -> Pending|Ready
-- KEYS[3] pending   HASH  step -> number of dependencies not yet Completed
-- KEYS[4] children  HASH  step -> JSON array of dependent step names
-- KEYS[5] ready     ZSET  step -> eligible-at (ms); 0 = claimable now
-- KEYS[6] needs     HASH  step -> JSON array of steps whose results its bindings read
-- KEYS[7] fenced    STRING set by fence_execution: recovery gave this ExecutionId up
-- KEYS[8] running   ZSET  step -> lease-until ms     KEYS[9] token   HASH step -> claim token
-- KEYS[10] claimed  HASH  step -> claimed-at ms      KEYS[11] control HASH (status)
--          (KEYS[8..11] only with ARGV[3] > 0)
-- ARGV[1] JSON object of meta fields (string values)
-- ARGV[2] JSON array of {name, deps:[...], children:[...], needs:[...]}
-- ARGV[3] steps to claim N (absent or 0: none)   ARGV[4] lease ms   ARGV[5] token prefix (random)
-- Returns: {1, now_ms} created (N absent or 0) | {0, now_ms} already exists (nothing changed)
--          {1, now_ms, backlog, n, per claimed step: name, token, retry_count, deps_json}
--            created with N > 0 (the claims as advance_steps returns them; backlog = steps
--            left in the ready set)
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
local max_claim = tonumber(ARGV[3] or '0')
if max_claim <= 0 then return {1, now} end
local names = {}
if not redis.call('HGET', KEYS[11], 'status') then
  names = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, max_claim)
end
local claims = {}
local lease_until = now + tonumber(ARGV[4])
for _, name in ipairs(names) do
  local seq = redis.call('HINCRBY', KEYS[1], 'claim_seq', 1)
  local token = ARGV[5] .. '.' .. seq
  redis.call('ZREM', KEYS[5], name)
  redis.call('ZADD', KEYS[8], lease_until, name)
  redis.call('HSET', KEYS[2], name, 'Running')
  redis.call('HSET', KEYS[9], name, token)
  redis.call('HSET', KEYS[10], name, now)
  local deps = {}  -- nothing has completed yet: every result it reads is null
  for _, dep in ipairs(cjson.decode(redis.call('HGET', KEYS[6], name) or '[]')) do
    deps[dep] = cjson.null
  end
  table.insert(claims, name)
  table.insert(claims, token)
  table.insert(claims, '0')
  table.insert(claims, cjson.encode(deps))
end
local out = {1, now, redis.call('ZCARD', KEYS[5]), #names}
for _, value in ipairs(claims) do table.insert(out, value) end
return out
