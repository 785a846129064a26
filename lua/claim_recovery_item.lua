-- claim_recovery_item: one execution recovery reconciler takes one item (a local run of an
-- Unsafe runtime instance) for recovery, so concurrent reconcilers recover it exactly once.
-- A claim whose lease passed (its reconciler died mid-item) may be taken over; a done item
-- is never claimed again.
-- Key layout: both keys live under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry  HASH  health must be Unsafe
-- KEYS[2] recovery  HASH  local run id -> JSON {owner, lease_until_ms, attempt, done, outcome}
-- ARGV[1] local run id   ARGV[2] reconciler id   ARGV[3] claim lease ms
-- Returns: {1, now, attempt}     claimed by this reconciler
--          {0, now, owner}       claimed by another reconciler whose lease is still open
--          {2, now, outcome}     already recovered (done); nothing changed
--          {-1, now, health}     instance not Unsafe; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local health = redis.call('HGET', KEYS[1], 'health') or 'Healthy'
if health ~= 'Unsafe' then return {-1, now, health} end
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
