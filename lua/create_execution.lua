-- create_execution: create the hot DAG state of one execution, exactly once, and (when asked:
-- the local run that creates it advances it next) claim its first claimable steps in the same
-- call, exactly as advance_steps claims them, so a one-step run's step is created and claimed
-- in one round trip. Claims are made only by the call that creates the DAG, and none while
-- the execution has a control status. Sent again after its reply was lost (the same token
-- prefix: the caller derives it from the ExecutionId), it answers the claims that creation
-- made and still holds, their leases renewed, and changes nothing else.
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
-- ARGV[3] steps to claim N (absent or 0: none)   ARGV[4] lease ms
-- ARGV[5] token prefix (one per creation: the same when it is sent again)
-- Returns: {1, now_ms} created (N absent or 0) | {0, now_ms} already exists (nothing changed)
--          {1, now_ms, backlog, n, per claimed step: name, token, retry_count, deps_json}
--            created with N > 0 (the claims as advance_steps returns them; backlog = steps
--            left in the ready set)
--          {2, now_ms, backlog, n, claims as above} created already by a call with this token
--            prefix: the claims it made that its tokens still hold (n > 0), leases renewed
--          {-1, now_ms, reason} fenced: the ExecutionId may never be created (nothing changed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fenced = redis.call('GET', KEYS[7])
if fenced then return {-1, now, fenced} end
local function null_results(name)  -- what a step claimed before anything completed reads
  local deps = {}
  for _, dep in ipairs(cjson.decode(redis.call('HGET', KEYS[6], name) or '[]')) do
    deps[dep] = cjson.null
  end
  return cjson.encode(deps)
end
local function claims_reply(code, claims, count)
  local out = {code, now, redis.call('ZCARD', KEYS[5]), count}
  for _, value in ipairs(claims) do table.insert(out, value) end
  return out
end
local max_claim = tonumber(ARGV[3] or '0')
local lease_until = now + tonumber(ARGV[4] or '0')
if redis.call('EXISTS', KEYS[1]) == 1 then
  if max_claim <= 0 then return {0, now} end
  local mine, claims, count = ARGV[5] .. '.', {}, 0
  local tokens = redis.call('HGETALL', KEYS[9])
  for i = 1, #tokens, 2 do
    local name, token = tokens[i], tokens[i + 1]
    if string.sub(token, 1, #mine) == mine then
      redis.call('ZADD', KEYS[8], lease_until, name)
      for _, value in ipairs({name, token, '0', null_results(name)}) do table.insert(claims, value) end
      count = count + 1
    end
  end
  if count == 0 then return {0, now} end
  return claims_reply(2, claims, count)
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
if max_claim <= 0 then return {1, now} end
local names = {}
if not redis.call('HGET', KEYS[11], 'status') then
  names = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, max_claim)
end
local claims = {}
for _, name in ipairs(names) do
  local seq = redis.call('HINCRBY', KEYS[1], 'claim_seq', 1)
  local token = ARGV[5] .. '.' .. seq
  redis.call('ZREM', KEYS[5], name)
  redis.call('ZADD', KEYS[8], lease_until, name)
  redis.call('HSET', KEYS[2], name, 'Running')
  redis.call('HSET', KEYS[9], name, token)
  redis.call('HSET', KEYS[10], name, now)
  for _, value in ipairs({name, token, '0', null_results(name)}) do table.insert(claims, value) end
end
return claims_reply(1, claims, #names)
