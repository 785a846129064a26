-- shared_claim_next: claim the oldest Pending items (one or several) of one shared-queue
-- partition for one pump, exactly once, passing over the admission groups the pump found
-- saturated in its cycle.
-- Claims whose lease expired (a pump died between claim and dispatch) go back to Pending
-- first, keeping their original sequence; the expired claim's token is kept in the item's
-- `unsettled` list, because the token is also the id of the dispatch attempt that claim
-- made: the dead pump's provider call may have been accepted by an instance before it
-- could record it, and the next claimer must settle that attempt (and record the run it
-- created) instead of dispatching the run a second time. The claim token proves ownership
-- to shared_mark_dispatched / shared_requeue.
-- Passing over saturated groups costs O(skipped groups), not O(queue): Pending items are
-- indexed per admission group (lib/pending_index: `by group`, each group's turns in queue
-- order, and `group heads`, each group's oldest turn). Fairness across groups: the claim
-- takes the lowest turn among the groups not passed over, so the partition stays FIFO for
-- every group that can dispatch (across partitions: ARGV[7]). Priorities
-- within a group: the turn goes to the group's best item (`by priority`: highest priority,
-- then oldest arrival); when that is not the turn's holder, the two swap turns (the holder
-- takes the best item's later one), so a group never gets more or earlier turns than its
-- runs' queue times give it, whatever their priorities. The indexes are kept lazily:
-- scripts that make an item Pending add it; an entry whose item was claimed, cancelled,
-- requeued elsewhere or retired is dropped here when it reaches its group's front, and a
-- head sequence is only a lower bound, corrected here before it is trusted.
-- A queue written before the indexes existed (`indexed` not '2') is indexed once.
-- A run whose tenant has a dispatch rate limit (item `dispatch_limits`: GCRA cells) is
-- claimed only if every such limit takes a unit; otherwise its group is passed over for the
-- rest of this call (its turn keeps its place) and the reply says when it conforms again.
-- Key layout: every key lives under the hash tag of one shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] items        HASH  shared run id -> JSON item
-- KEYS[2] pending      ZSET  shared run id -> queue sequence
-- KEYS[3] claimed      ZSET  shared run id -> claim lease-until ms
-- KEYS[4] by group     ZSET  each admission group's turns (see lib/pending_index)
-- KEYS[5] group heads  ZSET  group -> a lower bound of its oldest Pending item's sequence
-- KEYS[6] indexed      STRING '2' once the pending items were indexed by group and priority
-- KEYS[7] by priority  ZSET  each admission group's items by priority, then arrival
-- KEYS[8] rates        HASH  the partition's rate limits (lib/gcra): tenants' dispatch limits
-- ARGV[1] claim token (random, from the caller)
-- ARGV[2] claimer: "<pump runtime instance id>/<pump worker id>"
-- ARGV[3] claim lease ms
-- ARGV[4] maximum number of expired claims to return to Pending in this call
-- ARGV[5] JSON array of admission groups to pass over ("[]": none). The pump names the
--         groups that already found no capacity in its cycle, so their items stay Pending
--         in place instead of being claimed and requeued one by one.
-- ARGV[6] most items to claim (default 1), oldest first; claim n's token is ARGV[1] .. n
-- ARGV[7] claim only while the item's sequence is below this (the first one: not above it;
--         "": no bound): the oldest run the caller leaves to the other partitions, so claims
--         stay FIFO across them
-- ARGV[8] how many of the partition's oldest Pending sequences to return (default 1)
-- Returns: {1, now, next, shared_run_id, attempts, unsettled, seq, ...}  claimed: one
--                                             group of four per item, in claim order
--                                             (Claimed, holding the turn it took; attempts
--                                             counted; unsettled: JSON array of its expired
--                                             claims' attempt ids, "{}" when empty; seq: the
--                                             turn's sequence, integer text); next: JSON
--                                             array of the sequences (integer text) of the
--                                             partition's oldest Pending items now, at most
--                                             ARGV[8] ("{}" when none)
--          {2, now, seq}                      nothing claimed: the oldest claimable item
--                                             (its sequence: seq) is newer than ARGV[7]
--          {0, now, passed_over, wait_us}     nothing claimable: no Pending item outside
--                                             the passed-over groups (passed_over: how
--                                             many of those groups have Pending items;
--                                             wait_us: the soonest a group a dispatch rate
--                                             limit passed over conforms again, "" if none)
local PENDING, BY_GROUP, GROUP_HEADS, BY_PRIORITY, RATES = 2, 4, 5, 7, 8
-- include: gcra
-- include: pending_members
-- include: pending_index
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function first_turn(group)
  return redis.call('ZRANGEBYLEX', KEYS[BY_GROUP], '[' .. group .. '\31', '(' .. group .. '\32', 'LIMIT', 0, 1)[1]
end

local function first_by_priority(group)
  return redis.call('ZRANGEBYLEX', KEYS[BY_PRIORITY], '[' .. group .. '\31', '(' .. group .. '\32', 'LIMIT', 0, 1)[1]
end

if redis.call('GET', KEYS[6]) ~= '2' then
  local all = redis.call('ZRANGE', KEYS[PENDING], 0, -1)
  for _, srun in ipairs(all) do
    local raw = redis.call('HGET', KEYS[1], srun)
    if raw then index_pending(srun, cjson.decode(raw)) end
  end
  redis.call('SET', KEYS[6], '2')
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, srun in ipairs(expired) do
  local raw = redis.call('HGET', KEYS[1], srun)
  redis.call('ZREM', KEYS[3], srun)
  if raw then
    local item = cjson.decode(raw)
    if item.token then
      item.unsettled = item.unsettled or {}
      table.insert(item.unsettled, item.token)
    end
    item.status = 'Pending'
    item.token = nil
    item.claimed_by = nil
    item.lease_until_ms = nil
    item.last_requeue_reason = 'claim lease expired'
    redis.call('HSET', KEYS[1], srun, cjson.encode(item))
    index_pending(srun, item)
  end
end

local skipped, skipped_count = {}, 0
for _, group in ipairs(cjson.decode(ARGV[5])) do
  skipped[group] = true
  skipped_count = skipped_count + 1
end

-- The live head of `group`: its oldest turn whose item is still Pending with that sequence
-- (stale entries are dropped on the way); nil when the group has none.
local function live_head(group)
  while true do
    local first = first_turn(group)
    if not first then return nil end
    local seq = tonumber(string.sub(first, #group + 2, #group + 21))
    local srun = string.sub(first, #group + 23)
    local raw = redis.call('HGET', KEYS[1], srun)
    local item = raw and cjson.decode(raw)
    if item and item.status == 'Pending' and tonumber(item.seq) == seq then return first, seq, srun, item end
    redis.call('ZREM', KEYS[BY_GROUP], first)
  end
end

-- The oldest claimable turn: its member, sequence, holder (run id, item) and group; or nil and
-- how many passed-over groups have Pending items.
local function oldest_claimable()
  while true do
    -- The first skipped_count + 1 heads hold at least one group that is not passed over.
    local heads = redis.call('ZRANGE', KEYS[GROUP_HEADS], 0, skipped_count, 'WITHSCORES')
    local corrected, passed_over = false, 0
    for i = 1, #heads, 2 do
      local group, head = heads[i], tonumber(heads[i + 1])
      if skipped[group] then
        passed_over = passed_over + 1
      else
        local member, seq, srun, item = live_head(group)
        if not member then
          redis.call('ZREM', KEYS[GROUP_HEADS], group)
          redis.call('ZREMRANGEBYLEX', KEYS[BY_PRIORITY], '[' .. group .. '\31', '(' .. group .. '\32')
          corrected = true
          break
        end
        if seq ~= head then
          -- Only a lower bound: another group's head may come first. Correct it, look again.
          redis.call('ZADD', KEYS[GROUP_HEADS], seq, group)
          corrected = true
          break
        end
        return {member = member, seq = seq, srun = srun, item = item, group = group}
      end
    end
    if not corrected then return nil, passed_over end
  end
end

-- The group's best Pending item (highest priority, then oldest arrival): `turn` itself when
-- its holder comes first (no further read), else that item (stale entries dropped).
local function best_of_group(turn)
  local group = turn.group
  while true do
    local first = first_by_priority(group)
    if not first then return turn end
    local arrival = tonumber(string.sub(first, #group + 4, #group + 23))
    local srun = string.sub(first, #group + 25)
    local item = turn.item
    if srun ~= turn.srun then
      local raw = redis.call('HGET', KEYS[1], srun)
      item = raw and cjson.decode(raw)
    end
    if item and item.status == 'Pending' and tonumber(item.arrival or item.seq) == arrival then
      if srun == turn.srun then return turn end
      return {srun = srun, item = item, group = group}
    end
    redis.call('ZREM', KEYS[BY_PRIORITY], first)
  end
end

-- Claim `chosen` (the group's best item) with the turn `turn`; the turn's holder, when another
-- item, takes the claimed item's turn instead.
local function claim(turn, chosen, token)
  local group, item = turn.group, chosen.item
  redis.call('ZREM', KEYS[BY_GROUP], turn.member)
  redis.call('ZREM', KEYS[BY_PRIORITY], priority_member(chosen.srun, item))
  redis.call('ZREM', KEYS[PENDING], chosen.srun)
  if chosen ~= turn then
    local later = tonumber(item.seq)
    redis.call('ZREM', KEYS[BY_GROUP], turn_member(chosen.srun, group, later))
    turn.item.seq = item.seq
    redis.call('HSET', KEYS[1], turn.srun, cjson.encode(turn.item))
    redis.call('ZADD', KEYS[PENDING], later, turn.srun)
    redis.call('ZADD', KEYS[BY_GROUP], 0, turn_member(turn.srun, group, later))
    item.seq = string.format('%d', turn.seq)
  end
  local following = first_turn(group)
  if following then
    redis.call('ZADD', KEYS[GROUP_HEADS], tonumber(string.sub(following, #group + 2, #group + 21)), group)
  else
    redis.call('ZREM', KEYS[GROUP_HEADS], group)
  end
  item.status = 'Claimed'
  item.token = token
  item.claimed_by = ARGV[2]
  item.claimed_at_ms = now
  item.lease_until_ms = now + tonumber(ARGV[3])
  item.attempts = (item.attempts or 0) + 1
  redis.call('HSET', KEYS[1], chosen.srun, cjson.encode(item))
  redis.call('ZADD', KEYS[3], item.lease_until_ms, chosen.srun)
  return chosen.srun, item
end

local limit = tonumber(ARGV[6] or '1')
local below = tonumber(ARGV[7] or '')
local reply = {1, now, ''}
local claimed, wait_us = 0, nil
while claimed < limit do
  local found, passed_over = oldest_claimable()
  if not found then
    if claimed == 0 then return {0, now, passed_over, wait_us or ''} end
    break
  end
  -- Claims only while older than the next partition's head, so claims stay FIFO across
  -- partitions. The first may tie with it (the caller chose this partition on a tie); when it
  -- is newer, the caller's view of the heads was stale (another pump claimed meanwhile):
  -- nothing is claimed and its sequence returned, so the caller looks again.
  if below and (found.seq > below or (claimed > 0 and found.seq == below)) then
    if claimed == 0 then return {2, now, found.seq} end
    break
  end
  local chosen = best_of_group(found)
  local refused = 0
  if chosen.item.dispatch_limits then refused = gcra_take(cjson.decode(chosen.item.dispatch_limits), t) end
  if refused ~= 0 then
    skipped[found.group] = true
    skipped_count = skipped_count + 1
    wait_us = math.min(wait_us or refused[1], refused[1])
  else
    claimed = claimed + 1
    local srun, item = claim(found, chosen, ARGV[1] .. claimed)
    table.insert(reply, srun)
    table.insert(reply, item.attempts)
    table.insert(reply, cjson.encode(item.unsettled or {}))
    table.insert(reply, string.format('%d', tonumber(item.seq)))
  end
end
local following = redis.call('ZRANGE', KEYS[PENDING], 0, tonumber(ARGV[8] or '1') - 1, 'WITHSCORES')
local next_seqs = {}
for i = 2, #following, 2 do table.insert(next_seqs, following[i]) end
reply[3] = cjson.encode(next_seqs)
return reply
