-- complete_recovery_item: the reconciler holding an item's recovery claim closes it: Done
-- (never claimed again) or Retry (the claim is dropped; a later pass tries again).
-- Key layout: the key lives under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] recovery  HASH  local run id -> JSON {owner, lease_until_ms, attempt, done, outcome}
-- ARGV[1] local run id   ARGV[2] reconciler id   ARGV[3] done | retry   ARGV[4] outcome
-- Returns: {1, now}  closed
--          {0, now}  this reconciler does not hold the claim; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return {0, now} end
local item = cjson.decode(raw)
if item.done or item.owner ~= ARGV[2] then return {0, now} end
if ARGV[3] == 'retry' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {1, now}
end
item.done = true
item.outcome = ARGV[4]
item.completed_at_ms = now
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(item))
return {1, now}
