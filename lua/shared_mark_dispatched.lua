-- shared_mark_dispatched: record a successful provider dispatch of a shared run.
-- Called only after the runtime provider accepted the run into a local queue. With a claim
-- token the queue item must still be Claimed by that token (it becomes Dispatched); with an
-- empty token (DirectDispatch, no queue item) the run must still be Submitted. Earlier
-- unsettled dispatch attempts of the item are forgotten: the run is recorded now.
-- Sent again after its reply was lost (the connection failed after Redis ran it), it finds
-- its own recording and answers applied again, changing nothing: the run record dispatched by
-- this token (`dispatch_attempt_id`: kept after the run finished and its item left the queue),
-- or for a direct dispatch the run holding this local run id.
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] items       HASH  shared run id -> JSON item
-- KEYS[2] claimed     ZSET  shared run id -> claim lease-until ms
-- KEYS[3] run record  HASH  {squeue}:run:<shared run id>
-- ARGV[1] shared run id
-- ARGV[2] claim token ("" = direct dispatch without a queue item)
-- ARGV[3] JSON object of string fields to set on the run (local_run_id,
--         assigned_runtime_instance_id, pump identity, provider, reservation expiry)
-- Returns: {1, now}          run Dispatched (and item Dispatched)
--          {1, now, 'resent'} this very recording was applied already; nothing changed
--          {0, now, reason}  claim_lapsed (this token's claim expired: its attempt is among
--                            the item's unsettled ones, the next claimer records the run the
--                            instance accepted), claim_lost, item_missing, or the status of a
--                            run that is not Submitted (direct dispatch); nothing changed
--          {-1, now}         run missing; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
if redis.call('EXISTS', KEYS[3]) == 0 then return {-1, now} end
local fields = cjson.decode(ARGV[3])
if ARGV[2] ~= '' then
  if redis.call('HGET', KEYS[3], 'dispatch_attempt_id') == ARGV[2] then return {1, now, 'resent'} end
  local raw = redis.call('HGET', KEYS[1], srun)
  if not raw then return {0, now, 'item_missing'} end
  local item = cjson.decode(raw)
  if item.status ~= 'Claimed' or item.token ~= ARGV[2] then
    for _, attempt in ipairs(item.unsettled or {}) do
      if attempt == ARGV[2] then return {0, now, 'claim_lapsed'} end
    end
    return {0, now, 'claim_lost'}
  end
  item.status = 'Dispatched'
  item.token = nil
  item.unsettled = nil
  item.lease_until_ms = nil
  item.dispatched_at_ms = now
  redis.call('HSET', KEYS[1], srun, cjson.encode(item))
  redis.call('ZREM', KEYS[2], srun)
  redis.call('HSET', KEYS[3], 'dispatch_attempt_id', ARGV[2])
else
  local status, local_run = unpack(redis.call('HMGET', KEYS[3], 'status', 'local_run_id'))
  if status ~= 'Submitted' then
    if fields.local_run_id and local_run == fields.local_run_id then return {1, now, 'resent'} end
    return {0, now, status}
  end
end
for field, value in pairs(fields) do
  redis.call('HSET', KEYS[3], field, value)
end
redis.call('HSET', KEYS[3], 'status', 'Dispatched', 'dispatched_at_ms', now, 'updated_at_ms', now)
return {1, now}
