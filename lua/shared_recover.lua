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
-- KEYS[5] by group    ZSET  the per-admission-group pending index (all scores 0):
--                            "<group>\31<queue sequence, 20 digits>\31<shared run id>"
-- KEYS[6] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- ARGV[1] shared run id   ARGV[2] unsafe runtime instance id   ARGV[3] its local run id
-- ARGV[4] target status: QueuedGlobally | ScaleOutRequested
-- ARGV[5] resume execution id ("" for a local-queued run)
-- ARGV[6] JSON object of string fields to set (reason, admission, scale-out request id)
-- Returns: {1, now, seq}     recovered (seq 0 for ScaleOutRequested)
--          {2, now}          already recovered from this local run; nothing changed
--          {0, now, status}  not Dispatched to that instance as that local run; unchanged
--          {-1, now}         run missing; nothing changed
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
  'dispatched_at_ms', 'reservation_expires_at_ms', 'pump_runtime_instance_id', 'pump_worker_id')
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
-- The partition's queue clock in microseconds, strictly increasing: partitions' heads compare
-- by time (a burst drifts it ahead only past one run per microsecond). Written as integer
-- text: cjson keeps 14 digits of a number, a microsecond clock has 16.
local seq = math.max(tonumber(redis.call('GET', KEYS[4]) or '0') + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('SET', KEYS[4], string.format('%d', seq))
local item = {status = 'Pending', seq = string.format('%d', seq), attempts = attempts, enqueued_at_ms = now,
  last_requeue_reason = fields.last_requeue_reason,
  group = redis.call('HGET', KEYS[1], 'admission_group') or nil}
redis.call('HSET', KEYS[2], srun, cjson.encode(item))
redis.call('ZADD', KEYS[3], seq, srun)
local group = item.group or ''
redis.call('ZADD', KEYS[5], 0, group .. '\31' .. string.format('%020d', seq) .. '\31' .. srun)
redis.call('ZADD', KEYS[6], 'LT', seq, group)
redis.call('HSET', KEYS[1], 'status', 'QueuedGlobally')
return {1, now, seq}
