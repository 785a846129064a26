-- shared_cancel: cancel a shared run that has not been dispatched yet.
-- Cancellable statuses: Submitted, QueuedGlobally, ScaleOutRequested. A Pending item leaves
-- the queue and its group's indexes (lib/pending_index); a Claimed item means a pump is
-- dispatching it right now (retry shortly). A run with a concurrency key gives its slot back
-- or leaves its key's line, and the key's waiting runs take the free slots (lib/flow_keys).
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] run record  HASH  {squeue}:run:<shared run id>
-- KEYS[2] items       HASH  shared run id -> JSON item
-- KEYS[3] pending     ZSET  shared run id -> queue sequence
-- KEYS[4] ended       ZSET  shared run id -> ended-at ms (the lifecycle sweeper retires it)
-- KEYS[5] by group    ZSET  each admission group's turns (see lib/pending_index)
-- KEYS[6] by priority ZSET  each admission group's items by priority, then arrival
-- KEYS[7] group heads ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[8] seq         STRING the partition's queue clock (lib/queue_clock)
-- KEYS[9] admitted    ZSET  per-key concurrency (lib/flow_keys)
-- KEYS[10] waiting    ZSET  per-key concurrency: each key's line of Held runs
-- KEYS[11] evicting   ZSET  per-key concurrency: runs being cancelled, still holding a slot
-- KEYS[12] slots      HASH  per-key concurrency: run -> the slot it holds
-- ARGV[1] shared run id   ARGV[2] reason   ARGV[3] requested by
-- Returns: {1, now, previous_status}  cancelled (run Cancelled, item Cancelled)
--          {0, now, status}           not cancellable here (Dispatched or terminal)
--          {-2, now, 'Claimed'}       a pump holds the item; nothing changed
--          {-1, now}                  run missing
local ITEMS, PENDING, BY_GROUP, BY_PRIORITY, GROUP_HEADS, QUEUE_CLOCK = 2, 3, 5, 6, 7, 8
local ADMITTED, WAITING, EVICTING, SLOTS = 9, 10, 11, 12
-- include: queue_clock
-- include: pending_members
-- include: pending_index
-- include: flow_keys
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {-1, now} end
if status ~= 'Submitted' and status ~= 'QueuedGlobally' and status ~= 'ScaleOutRequested' then
  return {0, now, status}
end
local raw = redis.call('HGET', KEYS[2], srun)
local flow_key = nil
if raw then
  local item = cjson.decode(raw)
  flow_key = item.flow_key
  if item.status == 'Claimed' then return {-2, now, 'Claimed'} end
  if item.status == 'Pending' then
    redis.call('ZREM', KEYS[3], srun)
    redis.call('ZREM', KEYS[5], turn_member(srun, item.group or '', tonumber(item.seq)))
    redis.call('ZREM', KEYS[6], priority_member(srun, item))
  elseif item.status == 'Held' then
    redis.call('ZREM', KEYS[WAITING], waiting_member(srun, item))
  end
  if item.status == 'Pending' or item.status == 'Held' then
    item.status = 'Cancelled'
    redis.call('HSET', KEYS[2], srun, cjson.encode(item))
  end
end
redis.call('HSET', KEYS[1], 'status', 'Cancelled', 'failure_reason', ARGV[2],
  'cancelled_by', ARGV[3], 'updated_at_ms', now)
redis.call('ZADD', KEYS[4], now, srun)
-- Its slot goes back (a Held run had none: its leaving the line may let the next one in).
if flow_key and release(srun, t) == 0 then promote(flow_key, t) end
return {1, now, status}
