-- claim_ready_steps: claim up to N claimable steps of one execution for one worker.
-- A step is claimable when it is in the ready ZSET with eligible-at <= now (Ready, or
-- WaitingForRetry whose retry window opened); membership there implies all dependencies
-- Completed and no owner. The control gate is checked first.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running (ZSET step -> lease-until ms)
-- KEYS[5] token  KEYS[6] retries  KEYS[7] control  KEYS[8] needs  KEYS[9] result
-- KEYS[10] claimed (HASH step -> claimed-at ms, read by release_execution_claims)
-- ARGV[1] max steps   ARGV[2] lease ms   ARGV[3] worker id   ARGV[4] token prefix (random)
-- ARGV[5] blocked control statuses, comma separated
-- ARGV[6] owner: the local run claiming ('' = any); refused when the meta's
--         owner_local_run_id names another local run (the execution was taken over)
-- Returns: {1, now, n, control_status, next_eligible_ms, then per step: name, token,
--           retry_count, deps_json}  claimed (n may be 0); control_status '' when none is
--           set; next_eligible_ms is the earliest not-yet-open retry window ('' when n > 0
--           or nothing is waiting)
--          {-1, now} execution missing | {-2, now, status} execution terminal
--          {-3, now, control_status} claims blocked by execution control
--          {-8, now, owner} the execution belongs to another local run (superseded)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exec_status = redis.call('HGET', KEYS[1], 'status')
if not exec_status then return {-1, now} end
if exec_status ~= 'Running' then return {-2, now, exec_status} end
if ARGV[6] and ARGV[6] ~= '' then
  local owner = redis.call('HGET', KEYS[1], 'owner_local_run_id')
  if owner and owner ~= ARGV[6] then return {-8, now, owner} end
end
local control = redis.call('HGET', KEYS[7], 'status')
if control and string.find(',' .. ARGV[5] .. ',', ',' .. control .. ',', 1, true) then
  return {-3, now, control}
end
control = control or ''
local names = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #names == 0 then
  local nxt = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #nxt == 2 then return {1, now, 0, control, nxt[2]} end
  return {1, now, 0, control, ''}
end
local out = {1, now, #names, control, ''}
local lease_until = now + tonumber(ARGV[2])
for _, name in ipairs(names) do
  local seq = redis.call('HINCRBY', KEYS[1], 'claim_seq', 1)
  local token = ARGV[4] .. '.' .. seq
  redis.call('ZREM', KEYS[3], name)
  redis.call('ZADD', KEYS[4], lease_until, name)
  redis.call('HSET', KEYS[2], name, 'Running')
  redis.call('HSET', KEYS[5], name, token)
  redis.call('HSET', KEYS[10], name, now)
  local deps = {}
  local needs = cjson.decode(redis.call('HGET', KEYS[8], name) or '[]')
  for _, dep in ipairs(needs) do
    deps[dep] = redis.call('HGET', KEYS[9], dep) or cjson.null
  end
  local retries = redis.call('HGET', KEYS[6], name) or '0'
  table.insert(out, name)
  table.insert(out, token)
  table.insert(out, retries)
  table.insert(out, cjson.encode(deps))
end
return out
