-- claim_recovery_item: one execution recovery reconciler takes one item (a local run of a
-- dead incarnation of a runtime instance) for recovery, so concurrent reconcilers recover it
-- exactly once. An incarnation is dead when the instance is Unsafe (every local run on it),
-- or when another incarnation registered the instance id since (the local runs of the
-- superseded ones). A claim whose lease passed (its reconciler died mid-item) may be taken
-- over; a done item is never claimed again.
-- Key layout: both keys live under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry  HASH  incarnation, health
-- KEYS[2] recovery  HASH  local run id -> JSON {owner, lease_until_ms, attempt, done, outcome}
-- ARGV[1] local run id   ARGV[2] reconciler id   ARGV[3] claim lease ms
-- ARGV[4] the incarnation that accepted the local run
-- Returns: {1, now, attempt}     claimed by this reconciler
--          {0, now, owner}       claimed by another reconciler whose lease is still open
--          {2, now, outcome}     already recovered (done); nothing changed
--          {-1, now, health}     the local run's incarnation is alive; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reg = redis.call('HMGET', KEYS[1], 'health', 'incarnation')
local health = reg[1] or 'Healthy'
local superseded = health == 'Healthy' and (reg[2] or '') ~= ARGV[4]
if health ~= 'Unsafe' and not superseded then return {-1, now, health} end
local attempt = 1
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if raw then
  local item = cjson.decode(raw)
  if item.done then return {2, now, item.outcome or ''} end
  if item.owner ~= ARGV[2] and tonumber(item.lease_until_ms) > now then return {0, now, item.owner} end
  attempt = (item.attempt or 0) + 1
end
local claim = {owner = ARGV[2], lease_until_ms = now + tonumber(ARGV[3]), attempt = attempt, done = false}
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(claim))
return {1, now, attempt}
