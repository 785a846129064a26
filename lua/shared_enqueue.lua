-- shared_enqueue: put a shared run into the global shared queue as a Pending item.
-- Creates the run record when ARGV[2] carries its fields (QueueFirst submit), or requeues
-- an existing run whose status is one of ARGV[3] (DirectDispatch QueueGlobally, fulfilled
-- scale-out requeue). The run ends QueuedGlobally, its item Pending at the queue tail.
-- A run with a concurrency key (record fields flow_key, flow_limit, flow_strategy) not
-- holding a slot yet is placed by its key's strategy (lib/flow_keys): admitted (Pending) when
-- the key has a free slot and nobody waits, else Held in the key's line (queue, round-robin);
-- cancel-newest cancels the new run instead; cancel-in-progress first picks the key's oldest
-- live runs beyond limit - 1 for cancellation (a picked admitted run moves to `evicting`,
-- keeping its slot until it ends; the caller cancels every picked run).
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] run record   HASH  {squeue}:run:<shared run id>
-- KEYS[2] items        HASH  shared run id -> JSON item {status, seq, arrival, priority,
--                            attempts, group, ...} (group: the run's `admission_group`, which
--                            claims may pass over; priority, the concurrency key and the
--                            dispatch rate limits: copied from the run's fields)
-- KEYS[3] pending      ZSET  shared run id -> queue sequence (the partition's turns)
-- KEYS[4] seq          STRING the partition's queue clock: the last sequence given, in microseconds
--                            (max(last + 1, now): increasing, and comparable across partitions)
-- KEYS[5] tenant runs  ZSET  shared run id -> created-at ms (tenant listing index)
-- KEYS[6] by group     ZSET  each admission group's turns (see lib/pending_index)
-- KEYS[7] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[8] by priority  ZSET  each admission group's items by priority, then arrival
-- KEYS[9] rates        HASH  the partition's submit rate limits (see lib/gcra)
-- KEYS[10] admitted     ZSET  per-key concurrency: runs holding a slot of their key (lib/flow_keys)
-- KEYS[11] waiting      ZSET  per-key concurrency: each key's line of Held runs
-- KEYS[12] evicting     ZSET  per-key concurrency: runs being cancelled, still holding a slot
-- KEYS[13] slots        HASH  per-key concurrency: run -> the slot it holds
-- KEYS[14] ended        ZSET  shared run id -> ended-at ms (a run cancel-newest cancelled; the
--                             lifecycle sweeper retires it)
-- KEYS[15] (optional, creation only) idempotency key  HASH {shared_run_id, fingerprint,
--         created_at_ms} {squeue}:idem:<tenant>:<sha256 of the key>, expires after ARGV[6]
-- ARGV[1] shared run id
-- ARGV[2] JSON object of string fields to create the run with ("" = run must exist)
-- ARGV[3] comma separated statuses an existing run may be enqueued from
-- ARGV[4] JSON array of the submit's rate-limit cells [field, interval_us, tolerance_us]
--         ("[]": none), taken all or none once the run would be created
-- ARGV[5] (with KEYS[15]) fingerprint of the request (pipeline + input)
-- ARGV[6] (with KEYS[15]) idempotency window, ms
-- Returns: {1, now, seq, placement, picked...}  enqueued (run QueuedGlobally): placement
--                            'Pending' (item Pending) or 'Held' (in its key's line); picked: the
--                            runs cancel-in-progress picked for cancellation
--          {0, now, status}  refused: run exists in a status not allowed, or its item is
--                            already Pending/Claimed (status 'Queued'); nothing changed
--          {-1, now}         run missing and no fields to create it; nothing changed
--          {2, now, srun}    the idempotency key already made run srun with the same
--                            fingerprint; nothing changed
--          {3, now, srun}    the idempotency key made run srun for another request; nothing
--                            changed
--          {5, now, 'Cancelled'}  cancel-newest: the key has no free slot; the new run was
--                            created Cancelled (ended before dispatch)
--          {4, now, wait_us, field}  a rate limit (`field`) refused the new run: it conforms
--                            again in wait_us; nothing changed
local ITEMS, PENDING, QUEUE_CLOCK, BY_GROUP, GROUP_HEADS, BY_PRIORITY, RATES = 2, 3, 4, 6, 7, 8, 9
local ADMITTED, WAITING, EVICTING, SLOTS = 10, 11, 12, 13
-- include: gcra
-- include: queue_clock
-- include: pending_members
-- include: pending_index
-- include: flow_keys
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local srun = ARGV[1]
if KEYS[15] then
  local held = redis.call('HMGET', KEYS[15], 'shared_run_id', 'fingerprint')
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
  if old.status == 'Pending' or old.status == 'Claimed' or old.status == 'Held' then return {0, now, 'Queued'} end
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
  if KEYS[15] then
    redis.call('HSET', KEYS[15], 'shared_run_id', srun, 'fingerprint', ARGV[5], 'created_at_ms', now)
    redis.call('PEXPIRE', KEYS[15], ARGV[6])
  end
end
-- The oldest waiting run of `key` by arrival (whatever its priority) not in `taken`.
local function oldest_waiting(key, taken, taken_count)
  local oldest, oldest_arrival
  for rank = 0, 8 do
    local from, to = '[' .. key .. '\31' .. rank .. '\31', '(' .. key .. '\31' .. rank .. '\32'
    for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[WAITING], from, to, 'LIMIT', 0, taken_count + 1)) do
      local arrival = tonumber(string.sub(member, KEY_DIGITS + 4, KEY_DIGITS + 23))
      if not taken[member] and (not oldest_arrival or arrival < oldest_arrival) then
        oldest, oldest_arrival = member, arrival
      end
    end
  end
  return oldest
end

-- cancel-in-progress: the key's oldest live runs (admitted, then waiting) beyond `keep`, for
-- the caller to cancel; picked admitted runs move to `evicting` (they keep their slot).
local function pick_oldest(key, keep)
  local from, to = key_from(key)
  local live = redis.call('ZLEXCOUNT', KEYS[ADMITTED], from, to) + waiting_count(key)
  local picked, taken, taken_count = {}, {}, 0
  while live > keep do
    local oldest = redis.call('ZRANGEBYLEX', KEYS[ADMITTED], from, to, 'LIMIT', 0, 1)[1]
    if oldest then
      local run_id = string.sub(oldest, KEY_DIGITS + 23)
      redis.call('ZREM', KEYS[ADMITTED], oldest)
      redis.call('ZADD', KEYS[EVICTING], 0, oldest)
      table.insert(picked, run_id)
    else
      local member = oldest_waiting(key, taken, taken_count)
      if not member then break end
      taken[member], taken_count = true, taken_count + 1
      table.insert(picked, string.sub(member, KEY_DIGITS + 25))
    end
    live = live - 1
  end
  return picked, taken_count
end

local seq = string.format('%d', next_queue_seq(t))
local run = redis.call('HMGET', KEYS[1], 'admission_group', 'priority', 'flow_key', 'flow_limit', 'flow_strategy',
  'dispatch_limits')
local item = {status = 'Pending', seq = seq, arrival = seq, attempts = attempts, enqueued_at_ms = now,
  group = run[1] or nil, priority = tonumber(run[2]), flow_key = run[3] or nil, flow_limit = tonumber(run[4]),
  flow_strategy = run[5] or nil, dispatch_limits = run[6] or nil}
local picked, picked_waiting = {}, 0
if item.flow_key and not redis.call('HGET', KEYS[SLOTS], srun) then
  if item.flow_strategy == 'cancel-newest' and slots_used(item.flow_key) >= item.flow_limit then
    item.status = 'Cancelled'
    redis.call('HSET', KEYS[2], srun, cjson.encode(item))
    redis.call('HSET', KEYS[1], 'status', 'Cancelled', 'failure_reason', 'its concurrency key already has '
      .. item.flow_limit .. ' runs (strategy cancel-newest)', 'cancelled_by', 'concurrency key', 'updated_at_ms', now)
    redis.call('ZADD', KEYS[14], now, srun)
    return {5, now, 'Cancelled'}
  end
  if item.flow_strategy == 'cancel-in-progress' then
    picked, picked_waiting = pick_oldest(item.flow_key, item.flow_limit - 1)
  end
  -- Runs already waiting go first (those picked for cancellation do not count).
  if slots_used(item.flow_key) >= item.flow_limit or waiting_count(item.flow_key) > picked_waiting then
    hold(srun, item)
  else
    admit(srun, item)
  end
end
redis.call('HSET', KEYS[2], srun, cjson.encode(item))
if item.status == 'Pending' then index_pending(srun, item) end
redis.call('HSET', KEYS[1], 'status', 'QueuedGlobally', 'updated_at_ms', now)
local reply = {1, now, tonumber(seq), item.status}
for _, run_id in ipairs(picked) do table.insert(reply, run_id) end
return reply
