-- shared_requeue: give a claimed shared queue item back after a dispatch attempt that did
-- not dispatch. Target Pending: the item goes to the queue tail with a new sequence (a
-- delivery failure: it must not block the runs behind it). Target Waiting: the item goes
-- back to Pending at its own place, keeping its sequence (the turn it was claimed with) and
-- its arrival (no capacity for its tenant yet: the tenant's runs keep their order). Either way the run stays QueuedGlobally (no
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
-- KEYS[7] by group     ZSET  each admission group's turns (see lib/pending_index)
-- KEYS[8] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[9] by priority  ZSET  each admission group's items by priority, then arrival
-- KEYS[10] admitted    ZSET  per-key concurrency (lib/flow_keys): a Failed run's slot goes back
-- KEYS[11] waiting     ZSET  per-key concurrency: each key's line of Held runs
-- KEYS[12] evicting    ZSET  per-key concurrency: runs being cancelled, still holding a slot
-- KEYS[13] slots       HASH  per-key concurrency: run -> the slot it holds
-- ARGV[1] shared run id   ARGV[2] claim token   ARGV[3] Pending | Waiting | Failed
-- ARGV[4] reason
-- Returns: {1, now, seq}  requeued (seq 0 for Failed)
--          {0, now}       claim lost (not Claimed by this token); nothing changed
local ITEMS, PENDING, QUEUE_CLOCK, BY_GROUP, GROUP_HEADS, BY_PRIORITY = 1, 2, 4, 7, 8, 9
local ADMITTED, WAITING, EVICTING, SLOTS = 10, 11, 12, 13
-- include: queue_clock
-- include: pending_members
-- include: pending_index
-- include: flow_keys
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
  release(srun, t)
  return {1, now, 0}
end
if ARGV[3] == 'Pending' then
  -- At the tail: a new turn, and it arrives again.
  item.seq = string.format('%d', next_queue_seq(t))
  item.arrival = item.seq
end
item.status = 'Pending'
redis.call('HSET', KEYS[1], srun, cjson.encode(item))
index_pending(srun, item)
if run_exists then
  redis.call('HSET', KEYS[5], 'last_requeue_reason', ARGV[4], 'updated_at_ms', now)
end
return {1, now, tonumber(item.seq)}
