-- flow_release: a run with a concurrency key ended after dispatch (completed, failed,
-- cancelled, or failed by recovery): its slot goes back and its key's waiting runs take the
-- free slots, becoming Pending (lib/flow_keys). Only while the run is still Dispatched as the
-- local run that ended (a local run refused or taken over while the run was queued again
-- releases nothing: the run goes on). Idempotent: a run released before (or never admitted)
-- changes nothing. Runs that end before dispatch release in their own script (shared_cancel,
-- shared_requeue).
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] items        HASH  shared run id -> JSON item
-- KEYS[2] pending      ZSET  shared run id -> queue sequence
-- KEYS[3] seq          STRING the partition's queue clock (lib/queue_clock)
-- KEYS[4] by group     ZSET  each admission group's turns (lib/pending_index)
-- KEYS[5] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[6] by priority  ZSET  each admission group's items by priority, then arrival
-- KEYS[7] admitted     ZSET  runs holding a slot of their key
-- KEYS[8] waiting      ZSET  each key's line of Held runs
-- KEYS[9] evicting     ZSET  runs being cancelled, still holding a slot
-- KEYS[10] slots       HASH  run -> the slot it holds
-- KEYS[11] run record   HASH  {squeue}:run:<shared run id>
-- ARGV[1] shared run id   ARGV[2] the local run that ended
-- Returns: {1}  its slot went back (waiting runs of its key may have become Pending)
--          {0}  it held no slot, or it is not Dispatched as that local run; nothing changed
local ITEMS, PENDING, QUEUE_CLOCK, BY_GROUP, GROUP_HEADS, BY_PRIORITY = 1, 2, 3, 4, 5, 6
local ADMITTED, WAITING, EVICTING, SLOTS = 7, 8, 9, 10
-- include: queue_clock
-- include: pending_members
-- include: pending_index
-- include: flow_keys
local run = redis.call('HMGET', KEYS[11], 'status', 'local_run_id')
if run[1] ~= 'Dispatched' or run[2] ~= ARGV[2] then return {0} end
return {release(ARGV[1], redis.call('TIME'))}
