-- shared_requeue: give a claimed shared queue item back after a dispatch attempt that did
-- not dispatch. Target Pending: the item goes to the queue tail with a new sequence (a
-- delivery failure: it must not block the runs behind it). Target Waiting: the item goes
-- back to Pending at its own place, keeping its sequence (no capacity for its tenant yet:
-- the tenant's runs keep their order). Either way the run stays QueuedGlobally (no
-- LocalRunId, no ExecutionId). Target Failed: the item leaves the queue for good and the
-- run (when it exists) becomes Failed (missing run/snapshot).
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] items       HASH  shared run id -> JSON item
-- KEYS[2] pending     ZSET  shared run id -> queue sequence
-- KEYS[3] claimed     ZSET  shared run id -> claim lease-until ms
-- KEYS[4] seq         STRING the partition's queue clock (microseconds, max(last + 1, now))
-- KEYS[5] run record  HASH  {squeue}:run:<shared run id>
-- KEYS[6] ended       ZSET  shared run id -> ended-at ms (a Failed run; the lifecycle sweeper
--                           retires it)
-- KEYS[7] by group    ZSET  the per-admission-group pending index (all scores 0):
--                            "<group>\31<queue sequence, 20 digits>\31<shared run id>"
-- KEYS[8] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- ARGV[1] shared run id   ARGV[2] claim token   ARGV[3] Pending | Waiting | Failed
-- ARGV[4] reason
-- Returns: {1, now, seq}  requeued (seq 0 for Failed)
--          {0, now}       claim lost (not Claimed by this token); nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
local raw = redis.call('HGET', KEYS[1], srun)
if not raw then return {0, now} end
local item = cjson.decode(raw)
if item.status ~= 'Claimed' or item.token ~= ARGV[2] then return {0, now} end
item.token = nil
item.claimed_by = nil
item.lease_until_ms = nil
item.last_requeue_reason = ARGV[4]
redis.call('ZREM', KEYS[3], srun)
local run_exists = redis.call('EXISTS', KEYS[5]) == 1
if ARGV[3] == 'Failed' then
  item.status = 'Failed'
  redis.call('HSET', KEYS[1], srun, cjson.encode(item))
  if run_exists then
    redis.call('HSET', KEYS[5], 'status', 'Failed', 'failure_reason', ARGV[4], 'updated_at_ms', now)
  end
  redis.call('ZADD', KEYS[6], now, srun)
  return {1, now, 0}
end
local seq = tonumber(item.seq)
if ARGV[3] == 'Pending' then
  -- The partition's queue clock (microseconds, strictly increasing; integer text: see shared_enqueue).
  seq = math.max(tonumber(redis.call('GET', KEYS[4]) or '0') + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('SET', KEYS[4], string.format('%d', seq))
end
item.status = 'Pending'
item.seq = string.format('%d', seq)
redis.call('HSET', KEYS[1], srun, cjson.encode(item))
redis.call('ZADD', KEYS[2], seq, srun)
local group = item.group or ''
redis.call('ZADD', KEYS[7], 0, group .. '\31' .. string.format('%020d', seq) .. '\31' .. srun)
redis.call('ZADD', KEYS[8], 'LT', seq, group)
if run_exists then
  redis.call('HSET', KEYS[5], 'last_requeue_reason', ARGV[4], 'updated_at_ms', now)
end
return {1, now, seq}
