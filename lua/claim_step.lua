-- claim_step: claim one named step (used after a concurrency lease was acquired for it).
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] token
-- KEYS[6] retries  KEYS[7] control  KEYS[8] needs  KEYS[9] result  KEYS[10] pending
-- KEYS[11] claimed (HASH step -> claimed-at ms, read by release_execution_claims)
-- KEYS[12] assistants (ZSET assistant -> assistance lease-until ms, see assist_join)
-- ARGV[1] step   ARGV[2] lease ms   ARGV[3] worker id   ARGV[4] token prefix
-- ARGV[5] blocked control statuses, comma separated
-- ARGV[6] owner: the local run claiming ('' = any); refused when the meta's
--         owner_local_run_id names another local run (the execution was taken over);
--         '@<assistant>': an instance assisting the execution, refused once its lease lapsed
-- Returns: {1, now, token, retry_count, deps_json, control_status ('' when none)} claimed
--          {-1, now} execution missing   {-2, now, status} execution terminal
--          {-3, now, control_status} blocked by control   {-4, now} step unknown
--          {-5, now, step_status} step not claimable (owned, done, failed)
--          {-6, now, pending_deps} dependencies not Completed
--          {-7, now, eligible_at} retry window not open yet
--          {-8, now, owner} the execution belongs to another local run (superseded), or
--          {-8, now, 'assistance lease lapsed'} the assistant's lease lapsed
local ASSISTANTS = 12
-- include: assistant_lease
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exec_status = redis.call('HGET', KEYS[1], 'status')
if not exec_status then return {-1, now} end
if exec_status ~= 'Running' then return {-2, now, exec_status} end
local refused = assistant_refusal(ARGV[6] or '', now)
if refused then return {-8, now, refused} end
if ARGV[6] and ARGV[6] ~= '' and string.sub(ARGV[6], 1, 1) ~= '@' then
  local owner = redis.call('HGET', KEYS[1], 'owner_local_run_id')
  if owner and owner ~= ARGV[6] then return {-8, now, owner} end
end
local control = redis.call('HGET', KEYS[7], 'status')
if control and string.find(',' .. ARGV[5] .. ',', ',' .. control .. ',', 1, true) then
  return {-3, now, control}
end
local name = ARGV[1]
local status = redis.call('HGET', KEYS[2], name)
if not status then return {-4, now} end
local pending = tonumber(redis.call('HGET', KEYS[10], name) or '0')
if status == 'Pending' or pending > 0 then return {-6, now, pending} end
if status ~= 'Ready' and status ~= 'WaitingForRetry' then return {-5, now, status} end
local eligible = redis.call('ZSCORE', KEYS[3], name)
if not eligible then return {-5, now, status} end
if tonumber(eligible) > now then return {-7, now, eligible} end
local seq = redis.call('HINCRBY', KEYS[1], 'claim_seq', 1)
local token = ARGV[4] .. '.' .. seq
redis.call('ZREM', KEYS[3], name)
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), name)
redis.call('HSET', KEYS[2], name, 'Running')
redis.call('HSET', KEYS[5], name, token)
redis.call('HSET', KEYS[11], name, now)
local deps = {}
for _, dep in ipairs(cjson.decode(redis.call('HGET', KEYS[8], name) or '[]')) do
  deps[dep] = redis.call('HGET', KEYS[9], dep) or cjson.null
end
return {1, now, token, redis.call('HGET', KEYS[6], name) or '0', cjson.encode(deps), control or ''}
