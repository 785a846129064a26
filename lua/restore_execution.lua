-- restore_execution: recreate the hot DAG state of one execution from a normalized
-- document (replay), in one atomic call, only when no live state exists. Leftover keys of
-- the execution (claims, leases, partial state) are removed first; nothing is owned after.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] pending  KEYS[4] children  KEYS[5] ready
-- KEYS[6] needs  KEYS[7] result  KEYS[8] retries  KEYS[9] recoveries  KEYS[10] error
-- KEYS[11] running  KEYS[12] token  KEYS[13] claimed
-- ARGV[1] JSON object of meta fields (string values)
-- ARGV[2] JSON array of {name, status, pending, children (JSON text), needs (JSON text),
--         retries, recoveries, result? (JSON text), error? (JSON text), ready? (eligible-at ms)}
-- Returns: {1, now} restored | {0, now} live state exists (nothing changed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, now} end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
for field, value in pairs(cjson.decode(ARGV[1])) do
  redis.call('HSET', KEYS[1], field, value)
end
local steps = cjson.decode(ARGV[2])
local completed = 0
for _, step in ipairs(steps) do
  redis.call('HSET', KEYS[2], step.name, step.status)
  redis.call('HSET', KEYS[3], step.name, step.pending)
  redis.call('HSET', KEYS[4], step.name, step.children)
  redis.call('HSET', KEYS[6], step.name, step.needs)
  if step.retries > 0 then redis.call('HSET', KEYS[8], step.name, step.retries) end
  if step.recoveries > 0 then redis.call('HSET', KEYS[9], step.name, step.recoveries) end
  if type(step.result) == 'string' then redis.call('HSET', KEYS[7], step.name, step.result) end
  if type(step.error) == 'string' then redis.call('HSET', KEYS[10], step.name, step.error) end
  if type(step.ready) == 'number' then redis.call('ZADD', KEYS[5], step.ready, step.name) end
  if step.status == 'Completed' then completed = completed + 1 end
end
redis.call('HSET', KEYS[1], 'step_count', #steps, 'completed_count', completed, 'claim_seq', 0,
  'restored_at_ms', now)
return {1, now}
