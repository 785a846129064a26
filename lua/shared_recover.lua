-- shared_recover: put a shared run that was dispatched to a now-Unsafe runtime instance back
-- on the normal path, exactly once: QueuedGlobally with a Pending item at the queue tail (the
-- pump re-admits it under its snapshot), or ScaleOutRequested when no tenant-visible capacity
-- exists (the scale-out watcher requeues it once capacity was created). An in-flight
-- execution keeps its ExecutionId in `resume_execution_id`; it is never cleared here.
-- The run must still be Dispatched to that instance as that local run.
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] run record  HASH  {squeue}:run:<shared run id>
-- KEYS[2] items       HASH  shared run id -> JSON item
-- KEYS[3] pending     ZSET  shared run id -> queue sequence
-- KEYS[4] seq         STRING the partition's queue clock (microseconds, max(last + 1, now))
-- KEYS[5] by group     ZSET  each admission group's turns (see lib/pending_index)
-- KEYS[6] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[7] by priority  ZSET  each admission group's items by priority, then arrival
-- ARGV[1] shared run id   ARGV[2] unsafe runtime instance id   ARGV[3] its local run id
-- ARGV[4] target status: QueuedGlobally | ScaleOutRequested
-- ARGV[5] resume execution id ("" for a local-queued run)
-- ARGV[6] JSON object of string fields to set (reason, admission, scale-out request id)
-- Returns: {1, now, seq}     recovered (seq 0 for ScaleOutRequested)
--          {2, now}          already recovered from this local run; nothing changed
--          {0, now, status}  not Dispatched to that instance as that local run; unchanged
--          {-1, now}         run missing; nothing changed
local PENDING, QUEUE_CLOCK, BY_GROUP, GROUP_HEADS, BY_PRIORITY = 3, 4, 5, 6, 7
-- include: queue_clock
-- include: pending_members
-- include: pending_index
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
local run = redis.call('HMGET', KEYS[1], 'status', 'assigned_runtime_instance_id', 'local_run_id',
  'recovered_local_run_id')
if not run[1] then return {-1, now} end
if run[4] == ARGV[3] then return {2, now} end
if run[1] ~= 'Dispatched' or run[2] ~= ARGV[2] or run[3] ~= ARGV[3] then return {0, now, run[1]} end
local fields = cjson.decode(ARGV[6])
for field, value in pairs(fields) do
  redis.call('HSET', KEYS[1], field, value)
end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'resume_execution_id', ARGV[5]) end
redis.call('HDEL', KEYS[1], 'local_run_id', 'assigned_runtime_instance_id', 'provider_name',
  'dispatched_at_ms', 'reservation_expires_at_ms', 'pump_runtime_instance_id', 'pump_worker_id',
  'dispatch_attempt_id')
redis.call('HSET', KEYS[1], 'recovered_local_run_id', ARGV[3], 'recovered_from_runtime_instance_id',
  ARGV[2], 'updated_at_ms', now)
redis.call('HINCRBY', KEYS[1], 'recovery_count', 1)
if ARGV[4] == 'ScaleOutRequested' then
  redis.call('HDEL', KEYS[2], srun)
  redis.call('ZREM', KEYS[3], srun)
  redis.call('HSET', KEYS[1], 'status', 'ScaleOutRequested')
  return {1, now, 0}
end
local attempts = 0
local raw = redis.call('HGET', KEYS[2], srun)
if raw then attempts = cjson.decode(raw).attempts or 0 end
local seq = string.format('%d', next_queue_seq(t))
local run = redis.call('HMGET', KEYS[1], 'admission_group', 'priority', 'flow_key', 'flow_limit', 'flow_strategy',
  'dispatch_limits')
local item = {status = 'Pending', seq = seq, arrival = seq, attempts = attempts, enqueued_at_ms = now,
  last_requeue_reason = fields.last_requeue_reason, group = run[1] or nil, priority = tonumber(run[2]),
  flow_key = run[3] or nil, flow_limit = tonumber(run[4]), flow_strategy = run[5] or nil,
  dispatch_limits = run[6] or nil}
redis.call('HSET', KEYS[2], srun, cjson.encode(item))
index_pending(srun, item)
redis.call('HSET', KEYS[1], 'status', 'QueuedGlobally')
return {1, now, tonumber(seq)}
