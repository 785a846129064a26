-- webhook_enqueue: put one webhook delivery (one event to one target) in the outbox, once.
-- The delivery id is derived from the event id and the target, so enqueueing the same event
-- again (a re-read stream entry, a re-published end) changes nothing.
-- Key layout: every key lives under the hash tag {webhooks} (one slot, Cluster safe).
-- KEYS[1] delivery        HASH  {webhooks}:delivery:<delivery id>
-- KEYS[2] due             ZSET  delivery id -> when it may be (re)attempted, ms
-- KEYS[3] event index     SET   {webhooks}:event:<event id> -> its delivery ids
-- ARGV[1] delivery id
-- ARGV[2] JSON object of string fields (event_id, event_type, tenant_id, target, url,
--         secret_env, body)
-- ARGV[3] how long the event index is kept, ms
-- Returns: {1, now}  created, due now
--          {0, now}  the delivery already exists; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, now} end
local fields = cjson.decode(ARGV[2])
for field, value in pairs(fields) do
  redis.call('HSET', KEYS[1], field, value)
end
redis.call('HSET', KEYS[1], 'delivery_id', ARGV[1], 'status', 'Pending', 'attempts', 0,
  'created_at_ms', now, 'next_attempt_at_ms', now)
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {1, now}
