-- assist_join: a runtime instance joins an execution it assists, or renews its seat there.
-- Execution assistance: idle workers of another instance (visible to the execution's tenant:
-- the caller checks that against the execution's snapshot first) claim and run its steps
-- through the same transitions as its owner's workers, claiming as '@<assistant>'; those
-- claims, completions and failures are accepted only while the assistant's lease here is
-- unexpired (lib/assistant_lease). Joining needs a Running execution with steps in its ready
-- set, run by another runtime instance; renewing needs an unexpired lease (a lapsed one stays
-- lapsed: that assistant has left and must join again).
-- The meta field `assistance` (a JSON object: assistant -> record) keeps who assisted:
-- runtime_instance_id, incarnation, workers, joined_at_ms, lease_until_ms, joins and, once it
-- left, left_at_ms, left_reason, steps_completed; run.status and the terminal snapshot read it.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta  KEYS[2] assistants (ZSET assistant -> lease-until ms)  KEYS[3] ready
-- ARGV[1] assistant ('<runtime instance id>|<incarnation>')  ARGV[2] lease ms
-- ARGV[3] 'join' | 'renew'  ARGV[4] runtime instance id  ARGV[5] incarnation
-- ARGV[6] workers the assistant brings (its effective worker count for this execution)
-- Returns: {1, now, lease_until_ms}  joined / renewed
--          {-1, now}                 execution missing
--          {-2, now, status}         execution not Running
--          {-3, now}                 join: nothing in the ready set
--          {-4, now}                 join: the execution runs on this runtime instance
--          {-5, now}                 renew: not joined (it left, or its lease lapsed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {-1, now} end
if status ~= 'Running' then return {-2, now, status} end
local assistant = ARGV[1]
local lease_until = now + tonumber(ARGV[2])
local records = cjson.decode(redis.call('HGET', KEYS[1], 'assistance') or '{}')
local record = records[assistant]
if ARGV[3] == 'renew' then
  local held = redis.call('ZSCORE', KEYS[2], assistant)
  if not held or tonumber(held) < now or not record then return {-5, now} end
else
  if redis.call('HGET', KEYS[1], 'runtime.instance.id') == ARGV[4] then return {-4, now} end
  if redis.call('ZCARD', KEYS[3]) == 0 then return {-3, now} end
  if not record then
    record = {runtime_instance_id = ARGV[4], incarnation = ARGV[5], joined_at_ms = now,
      joins = 0, steps_completed = 0}
  end
  record['joins'] = record['joins'] + 1
  record['workers'] = tonumber(ARGV[6])
  record['left_at_ms'] = nil
  record['left_reason'] = nil
end
record['lease_until_ms'] = lease_until
records[assistant] = record
redis.call('ZADD', KEYS[2], lease_until, assistant)
redis.call('HSET', KEYS[1], 'assistance', cjson.encode(records))
return {1, now, lease_until}
