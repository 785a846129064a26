-- shared_claim_next: claim the oldest Pending shared queue item for one pump, exactly once.
-- Claims whose lease expired (a pump died between claim and dispatch) go back to Pending
-- first, keeping their original sequence; the expired claim's token is kept in the item's
-- `unsettled` list, because the token is also the id of the dispatch attempt that claim
-- made: the dead pump's provider call may have been accepted by an instance before it
-- could record it, and the next claimer must settle that attempt (and record the run it
-- created) instead of dispatching the run a second time. The claim token proves ownership
-- to shared_mark_dispatched / shared_requeue.
-- Key layout: every key lives under the hash tag {squeue} (one slot, Cluster safe).
-- KEYS[1] items    HASH  shared run id -> JSON item
-- KEYS[2] pending  ZSET  shared run id -> queue sequence
-- KEYS[3] claimed  ZSET  shared run id -> claim lease-until ms
-- ARGV[1] claim token (random, from the caller)
-- ARGV[2] claimer: "<pump runtime instance id>/<pump worker id>"
-- ARGV[3] claim lease ms
-- ARGV[4] maximum number of expired claims to return to Pending in this call
-- ARGV[5] JSON array of admission groups to pass over ("[]": none). The pump names the
--         groups that already found no capacity in its cycle, so their items stay Pending
--         in place instead of being claimed and requeued one by one.
-- ARGV[6] maximum number of Pending items to look at in this call
-- Returns: {1, now, shared_run_id, attempts, unsettled}  claimed (item Claimed, attempts
--                                             counted; unsettled: JSON array of the expired
--                                             claims' attempt ids, "{}" when empty)
--          {0, now, passed_over}              nothing claimable: no Pending item, or only
--                                             items of skipped groups within the scan limit
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
    redis.call('ZADD', KEYS[2], item.seq, srun)
  end
end
local skipped_groups = {}
for _, group in ipairs(cjson.decode(ARGV[5])) do skipped_groups[group] = true end
local scan_limit = tonumber(ARGV[6])
local offset, scanned = 0, 0
while scanned < scan_limit do
  local batch = redis.call('ZRANGE', KEYS[2], offset, offset + 99)
  if #batch == 0 then break end
  for _, srun in ipairs(batch) do
    scanned = scanned + 1
    local raw = redis.call('HGET', KEYS[1], srun)
    local item = raw and cjson.decode(raw)
    if not item or item.status ~= 'Pending' then
      redis.call('ZREM', KEYS[2], srun)
    elseif item.group and skipped_groups[item.group] then
      offset = offset + 1
    else
      redis.call('ZREM', KEYS[2], srun)
      item.status = 'Claimed'
      item.token = ARGV[1]
      item.claimed_by = ARGV[2]
      item.claimed_at_ms = now
      item.lease_until_ms = now + tonumber(ARGV[3])
      item.attempts = (item.attempts or 0) + 1
      redis.call('HSET', KEYS[1], srun, cjson.encode(item))
      redis.call('ZADD', KEYS[3], item.lease_until_ms, srun)
      return {1, now, srun, item.attempts, cjson.encode(item.unsettled or {})}
    end
  end
end
return {0, now, offset}
