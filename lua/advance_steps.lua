-- advance_steps: the common path of one execution in one round trip. Completes any number of
-- steps (Running -> Completed, each for its current claim-token holder only, releasing the
-- dependents whose last dependency it was), then claims up to N claimable steps.
-- A step is claimable when it is in the ready ZSET with eligible-at <= now (Ready, or
-- WaitingForRetry whose retry window opened); membership there implies all dependencies
-- Completed and no owner. The control gate is checked before claiming (not completing:
-- a step that already ran may always report). Claims are skipped when N is 0.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running (ZSET step -> lease-until ms)
-- KEYS[5] token  KEYS[6] retries  KEYS[7] control  KEYS[8] needs  KEYS[9] result
-- KEYS[10] claimed (HASH step -> claimed-at ms, read by release_execution_claims)
-- KEYS[11] pending (HASH step -> dependencies not yet Completed)  KEYS[12] children
-- KEYS[13] assistants (ZSET assistant -> assistance lease-until ms, see assist_join)
-- ARGV[1] completions C, then C triples ARGV[2..1+3C]: step, claim token, result (JSON text)
-- ARGV[2+3C] max steps to claim N   ARGV[3+3C] lease ms   ARGV[4+3C] token prefix (random)
-- ARGV[5+3C] blocked control statuses, comma separated
-- ARGV[6+3C] owner: the local run claiming ('' or absent = any); claims are refused when the
--            meta's owner_local_run_id names another local run (recovery took it over).
--            '@<assistant>': an instance assisting the execution (no ownership check): its
--            completions and claims are refused once its assistance lease lapsed
-- ARGV[7+3C] '1': finalize the execution when this call converges it (lib/finalize), so the
--            worker that completes the last step needs no finalize_execution call
-- Returns: {-1, now} execution missing
--          {1, now, converged, C, per completion: code, detail,
--           claim_code, claim_detail, next_eligible_ms, n, per claimed step: name, token,
--           retry_count, deps_json, backlog, finalize_code, final_status}
--   converged=1 when nothing is ready or running after this call; backlog = steps left in
--   the ready set after the claims (what idle workers elsewhere could take: assistance);
--   finalize_code / final_status: lib/finalize's answer when converged and ARGV[7+3C] is
--   '1' (1: finalized now, 0: it already was), else '' / ''.
--   completion code 1 completed (detail = dependents it made Ready) | 0 token mismatch (stale
--   owner, or an assistant whose lease lapsed: nothing changed; detail '') | -2 step not
--   Running (detail = its status)
--   claim_code 1 (claim_detail = control status or '') | -2 execution terminal (claim_detail
--   = its status) | -3 claims blocked by execution control (claim_detail = control status)
--   | -8 the execution belongs to another local run (claim_detail = that owner), or the
--   assistant's lease lapsed (claim_detail = 'assistance lease lapsed');
--   next_eligible_ms is the earliest not-yet-open retry window ('' when n > 0 or none).
local META, STATUS, READY, RUNNING, CONTROL, ASSISTANTS = 1, 2, 3, 4, 7, 13
-- include: assistant_lease
-- include: finalize
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, now} end
local completions = tonumber(ARGV[1])
local base = 2 + 3 * completions
local claimer = ARGV[base + 4] or ''
local refused = assistant_refusal(claimer, now)
local out = {1, now, 0, completions}
local completed = 0
for i = 0, completions - 1 do
  local name, token = ARGV[2 + 3 * i], ARGV[3 + 3 * i]
  local status = redis.call('HGET', KEYS[2], name)
  if status ~= 'Running' then
    table.insert(out, -2)
    table.insert(out, status or '')
  elseif refused or redis.call('HGET', KEYS[5], name) ~= token then
    table.insert(out, 0)
    table.insert(out, '')
  else
    redis.call('HSET', KEYS[2], name, 'Completed')
    redis.call('HDEL', KEYS[5], name)
    redis.call('ZREM', KEYS[4], name)
    redis.call('HSET', KEYS[9], name, ARGV[4 + 3 * i])
    completed = completed + 1
    local released = 0
    for _, child in ipairs(cjson.decode(redis.call('HGET', KEYS[12], name) or '[]')) do
      if redis.call('HINCRBY', KEYS[11], child, -1) == 0 and redis.call('HGET', KEYS[2], child) == 'Pending' then
        redis.call('HSET', KEYS[2], child, 'Ready')
        redis.call('ZADD', KEYS[3], 0, child)
        released = released + 1
      end
    end
    table.insert(out, 1)
    table.insert(out, released)
  end
end
if completed > 0 then redis.call('HINCRBY', KEYS[1], 'completed_count', completed) end

local max_claim = tonumber(ARGV[base])
local control = redis.call('HGET', KEYS[7], 'status') or ''
local exec_status = redis.call('HGET', KEYS[1], 'status')
local claim_code, claim_detail, next_eligible = 1, control, ''
local names = {}
if max_claim > 0 then
  local owner = claimer ~= '' and string.sub(claimer, 1, 1) ~= '@'
    and redis.call('HGET', KEYS[1], 'owner_local_run_id')
  if exec_status ~= 'Running' then
    claim_code, claim_detail = -2, exec_status
  elseif refused then
    claim_code, claim_detail = -8, refused
  elseif owner and owner ~= claimer then
    claim_code, claim_detail = -8, owner
  elseif control ~= '' and string.find(',' .. ARGV[base + 3] .. ',', ',' .. control .. ',', 1, true) then
    claim_code = -3
  else
    names = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, max_claim)
    if #names == 0 then
      local nxt = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
      if #nxt == 2 then next_eligible = nxt[2] end
    end
  end
end
table.insert(out, claim_code)
table.insert(out, claim_detail)
table.insert(out, next_eligible)
table.insert(out, #names)
local lease_until = now + tonumber(ARGV[base + 1])
for _, name in ipairs(names) do
  local seq = redis.call('HINCRBY', KEYS[1], 'claim_seq', 1)
  local token = ARGV[base + 2] .. '.' .. seq
  redis.call('ZREM', KEYS[3], name)
  redis.call('ZADD', KEYS[4], lease_until, name)
  redis.call('HSET', KEYS[2], name, 'Running')
  redis.call('HSET', KEYS[5], name, token)
  redis.call('HSET', KEYS[10], name, now)
  local deps = {}
  for _, dep in ipairs(cjson.decode(redis.call('HGET', KEYS[8], name) or '[]')) do
    deps[dep] = redis.call('HGET', KEYS[9], dep) or cjson.null
  end
  table.insert(out, name)
  table.insert(out, token)
  table.insert(out, redis.call('HGET', KEYS[6], name) or '0')
  table.insert(out, cjson.encode(deps))
end
local backlog = redis.call('ZCARD', KEYS[3])
if backlog == 0 and redis.call('ZCARD', KEYS[4]) == 0 then out[3] = 1 end
table.insert(out, backlog)
local finalize_code, final_status = '', ''
if out[3] == 1 and ARGV[base + 5] == '1' then
  finalize_code, final_status = finalize_converged(now)
end
table.insert(out, finalize_code)
table.insert(out, final_status or '')
return out
