-- retire_shared_run: take a finished shared run out of the shared queue's live structures once
-- its run record is durable, and let the record itself expire after the retention. Finished
-- means: ended through the local run ARGV[2] (the record still names that local run and is not
-- waiting for a dispatch), or, with ARGV[2] empty, ended before any dispatch (Rejected,
-- Cancelled, Failed). The item leaves the item table (its last status stays on the record as
-- `queue_status`) and the pending / claimed sets; the run leaves its tenant's listing and the
-- ended set; the record is marked `archived_at_ms` (readers then answer from the durable run
-- record) and expires after ARGV[3] ms.
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] run record   HASH  {squeue}:run:<shared run id>
-- KEYS[2] items        HASH  shared run id -> JSON item
-- KEYS[3] pending      ZSET  shared run id -> queue sequence
-- KEYS[4] claimed      ZSET  shared run id -> claim lease-until ms
-- KEYS[5] tenant runs  ZSET  shared run id -> created-at ms (the run's tenant listing)
-- KEYS[6] ended        ZSET  shared run id -> ended-at ms (runs that ended before dispatch)
-- ARGV[1] shared run id   ARGV[2] local run id that ended it ("" = ended before dispatch)
-- ARGV[3] retention of the record, ms
-- Returns: {1, now}          retired
--          {2, now}          retired before; nothing changed
--          {0, now, status}  not finished (waiting for dispatch, or another local run's now);
--                            only its ended-set entry (a stale one) is removed
--          {-1, now}         run missing: its leftover item and memberships were removed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
local function forget_members()
  redis.call('HDEL', KEYS[2], srun)
  redis.call('ZREM', KEYS[3], srun)
  redis.call('ZREM', KEYS[4], srun)
  redis.call('ZREM', KEYS[5], srun)
  redis.call('ZREM', KEYS[6], srun)
end
local run = redis.call('HMGET', KEYS[1], 'status', 'local_run_id', 'archived_at_ms')
local status = run[1]
if not status then
  forget_members()
  return {-1, now}
end
if run[3] then return {2, now} end
local waiting = status == 'Submitted' or status == 'QueuedGlobally' or status == 'ScaleOutRequested'
local elsewhere = (ARGV[2] ~= '' and run[2] ~= ARGV[2]) or (ARGV[2] == '' and status == 'Dispatched')
if waiting or elsewhere then
  redis.call('ZREM', KEYS[6], srun)
  return {0, now, status}
end
local raw = redis.call('HGET', KEYS[2], srun)
if raw then redis.call('HSET', KEYS[1], 'queue_status', cjson.decode(raw).status) end
forget_members()
redis.call('HSET', KEYS[1], 'archived_at_ms', now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return {1, now}
