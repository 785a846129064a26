-- lib/pending_index: where a Pending shared-queue item is found. An item holds a turn of its
-- admission group (its `seq`: a queue-clock reading) and keeps its `arrival` (the sequence
-- it was queued with) and `priority` (1-9, absent: 5).
-- `pending`     ZSET run -> seq: the partition's turns (its head is the oldest turn).
-- `by group`    ZSET (scores 0) "<group>\31<seq, 20 digits>\31<run>": each group's turns in
--               order; `group heads` ZSET group -> a lower bound of its oldest turn.
-- `by priority` ZSET (scores 0) "<group>\31<9 - priority>\31<arrival, 20 digits>\31<run>":
--               each group's items highest priority first, then oldest arrival: the one that
--               takes the group's next turn.
-- Entries of items that left Pending are dropped lazily by the claim, never trusted.
-- Needs: PENDING, BY_GROUP, GROUP_HEADS, BY_PRIORITY, and lib/pending_members included first.
local function index_pending(srun, item)
  local group, seq = item.group or '', tonumber(item.seq)
  redis.call('ZADD', KEYS[PENDING], seq, srun)
  redis.call('ZADD', KEYS[BY_GROUP], 0, turn_member(srun, group, seq))
  redis.call('ZADD', KEYS[GROUP_HEADS], 'LT', seq, group)
  redis.call('ZADD', KEYS[BY_PRIORITY], 0, priority_member(srun, item))
end
