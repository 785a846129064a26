-- shared_enqueue: put a shared run into the global shared queue as a Pending item.
-- Creates the run record when ARGV[2] carries its fields (QueueFirst submit), or requeues
-- an existing run whose status is one of ARGV[3] (DirectDispatch QueueGlobally, fulfilled
-- scale-out requeue). The run ends QueuedGlobally, its item Pending at the queue tail.
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] run record   HASH  {squeue}:run:<shared run id>
-- KEYS[2] items        HASH  shared run id -> JSON item {status, seq, arrival, priority,
--                            attempts, group, ...} (group: the run's `admission_group`, which
--                            claims may pass over; priority: the run's `priority` field)
-- KEYS[3] pending      ZSET  shared run id -> queue sequence (the partition's turns)
-- KEYS[4] seq          STRING the partition's queue clock: the last sequence given, in microseconds
--                            (max(last + 1, now): increasing, and comparable across partitions)
-- KEYS[5] tenant runs  ZSET  shared run id -> created-at ms (tenant listing index)
-- KEYS[6] by group     ZSET  each admission group's turns (see lib/pending_index)
-- KEYS[7] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[8] by priority  ZSET  each admission group's items by priority, then arrival
-- KEYS[9] rates        HASH  the partition's submit rate limits (see lib/gcra)
-- KEYS[10] (optional, creation only) idempotency key  HASH {shared_run_id, fingerprint,
--         created_at_ms} {squeue}:idem:<tenant>:<sha256 of the key>, expires after ARGV[6]
-- ARGV[1] shared run id
-- ARGV[2] JSON object of string fields to create the run with ("" = run must exist)
-- ARGV[3] comma separated statuses an existing run may be enqueued from
-- ARGV[4] JSON array of the submit's rate-limit cells [field, interval_us, tolerance_us]
--         ("[]": none), taken all or none once the run would be created
-- ARGV[5] (with KEYS[10]) fingerprint of the request (pipeline + input)
-- ARGV[6] (with KEYS[10]) idempotency window, ms
-- Returns: {1, now, seq}     enqueued (run QueuedGlobally, item Pending)
--          {0, now, status}  refused: run exists in a status not allowed, or its item is
--                            already Pending/Claimed (status 'Queued'); nothing changed
--          {-1, now}         run missing and no fields to create it; nothing changed
--          {2, now, srun}    the idempotency key already made run srun with the same
--                            fingerprint; nothing changed
--          {3, now, srun}    the idempotency key made run srun for another request; nothing
--                            changed
--          {4, now, wait_us, field}  a rate limit (`field`) refused the new run: it conforms
--                            again in wait_us; nothing changed
local PENDING, QUEUE_CLOCK, BY_GROUP, GROUP_HEADS, BY_PRIORITY, RATES = 3, 4, 6, 7, 8, 9
-- include: gcra
-- include: queue_clock
-- include: pending_members
-- include: pending_index
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
if KEYS[10] then
  local held = redis.call('HMGET', KEYS[10], 'shared_run_id', 'fingerprint')
  if held[1] then
    if held[2] == ARGV[5] then return {2, now, held[1]} end
    return {3, now, held[1]}
  end
end
local exists = redis.call('EXISTS', KEYS[1]) == 1
if ARGV[2] ~= '' then
  if exists then return {0, now, redis.call('HGET', KEYS[1], 'status')} end
else
  if not exists then return {-1, now} end
  local status = redis.call('HGET', KEYS[1], 'status')
  if not string.find(',' .. ARGV[3] .. ',', ',' .. status .. ',', 1, true) then
    return {0, now, status}
  end
end
local attempts = 0
local raw = redis.call('HGET', KEYS[2], srun)
if raw then
  local old = cjson.decode(raw)
  if old.status == 'Pending' or old.status == 'Claimed' then return {0, now, 'Queued'} end
  attempts = old.attempts or 0
end
if ARGV[2] ~= '' then
  local refused = gcra_take(cjson.decode(ARGV[4]), t)
  if refused ~= 0 then return {4, now, refused[1], refused[2]} end
  local fields = cjson.decode(ARGV[2])
  for field, value in pairs(fields) do
    redis.call('HSET', KEYS[1], field, value)
  end
  redis.call('HSET', KEYS[1], 'created_at_ms', now)
  redis.call('ZADD', KEYS[5], now, srun)
  if KEYS[10] then
    redis.call('HSET', KEYS[10], 'shared_run_id', srun, 'fingerprint', ARGV[5], 'created_at_ms', now)
    redis.call('PEXPIRE', KEYS[10], ARGV[6])
  end
end
local seq = string.format('%d', next_queue_seq(t))
local run = redis.call('HMGET', KEYS[1], 'admission_group', 'priority')
local item = {status = 'Pending', seq = seq, arrival = seq, attempts = attempts, enqueued_at_ms = now,
  group = run[1] or nil, priority = tonumber(run[2])}
redis.call('HSET', KEYS[2], srun, cjson.encode(item))
index_pending(srun, item)
redis.call('HSET', KEYS[1], 'status', 'QueuedGlobally', 'updated_at_ms', now)
return {1, now, tonumber(seq)}
