-- lib/flow_keys: per-key concurrency of a shared-queue partition (docs/flow-control.md). A run
-- with a concurrency key (item `flow_key`: 32 hex digits naming tenant, pipeline and key value;
-- `flow_limit`; `flow_strategy`) holds one of its key's `flow_limit` slots from its admission
-- (queued for dispatch, or running) until it ends, or waits in its key's line (item `Held`:
-- no queue turn). Every key of one tenant lives in the tenant's partition.
-- `admitted` ZSET (scores 0) "<key>\31<seq, 20 digits>\31<run>": runs holding a slot
-- `evicting` ZSET (scores 0), the same members: runs cancel-in-progress asked to cancel, still
--          holding their slot until they end
-- `waiting`  ZSET (scores 0) "<key>\31<9 - priority>\31<arrival, 20 digits>\31<run>": the line
-- `slots`    HASH run -> its member of `admitted` / `evicting` (what a release gives back)
-- Needs: ITEMS, ADMITTED, WAITING, EVICTING, SLOTS, and lib/queue_clock, lib/pending_members,
-- lib/pending_index included first (with their key names).
local KEY_DIGITS = 32

local function key_from(key)
  return '[' .. key .. '\31', '(' .. key .. '\32'
end

local function slots_used(key)
  local from, to = key_from(key)
  return redis.call('ZLEXCOUNT', KEYS[ADMITTED], from, to) + redis.call('ZLEXCOUNT', KEYS[EVICTING], from, to)
end

local function waiting_count(key)
  local from, to = key_from(key)
  return redis.call('ZLEXCOUNT', KEYS[WAITING], from, to)
end

local function waiting_member(srun, item)
  return ranked_member(srun, item.flow_key, item)
end

-- The run takes a slot of its key (its item is, or becomes, Pending).
local function admit(srun, item)
  local member = turn_member(srun, item.flow_key, tonumber(item.seq))
  redis.call('ZADD', KEYS[ADMITTED], 0, member)
  redis.call('HSET', KEYS[SLOTS], srun, member)
end

local function hold(srun, item)
  item.status = 'Held'
  redis.call('ZADD', KEYS[WAITING], 0, waiting_member(srun, item))
end

-- The key's waiting runs take its free slots, best first (highest priority, then oldest). A
-- round-robin key's run joins the queue anew (a new turn, arriving now: the keys take turns);
-- the others keep their own place.
local function promote(key, t)
  local from, to = key_from(key)
  while true do
    local first = redis.call('ZRANGEBYLEX', KEYS[WAITING], from, to, 'LIMIT', 0, 1)[1]
    if not first then return end
    local srun = string.sub(first, KEY_DIGITS + 25)
    local raw = redis.call('HGET', KEYS[ITEMS], srun)
    local item = raw and cjson.decode(raw)
    if item and item.status == 'Held' and waiting_member(srun, item) == first then
      if slots_used(key) >= tonumber(item.flow_limit) then return end
      if item.flow_strategy == 'round-robin' then
        item.seq = string.format('%d', next_queue_seq(t))
        item.arrival = item.seq
      end
      item.status = 'Pending'
      admit(srun, item)
      redis.call('HSET', KEYS[ITEMS], srun, cjson.encode(item))
      index_pending(srun, item)
    end
    redis.call('ZREM', KEYS[WAITING], first)
  end
end

-- The run gives its slot back (it ended, or was cancelled before dispatch) and its key's
-- waiting runs take the free slots; 0 when it held none (never admitted, or released before).
local function release(srun, t)
  local member = redis.call('HGET', KEYS[SLOTS], srun)
  if not member then return 0 end
  redis.call('HDEL', KEYS[SLOTS], srun)
  redis.call('ZREM', KEYS[ADMITTED], member)
  redis.call('ZREM', KEYS[EVICTING], member)
  promote(string.sub(member, 1, KEY_DIGITS), t)
  return 1
end
