-- webhook_settle: record the outcome of one claimed attempt: Delivered, Retrying (due again
-- after an exponential back-off) or Dead (a dead-letter record after the last attempt).
-- Key layout: every key lives under the hash tag {webhooks} (one slot, Cluster safe).
-- KEYS[1] due        ZSET  delivery id -> when it may be (re)attempted, ms
-- KEYS[2] delivery   HASH  {webhooks}:delivery:<delivery id>
-- KEYS[3] dead       ZSET  delivery id -> when it was dead-lettered, ms
-- ARGV[1] delivery id
-- ARGV[2] claim token of the attempt
-- ARGV[3] 'delivered' or 'failed'
-- ARGV[4] HTTP status of the answer ('' = none)
-- ARGV[5] error text ('' = none)
-- ARGV[6] max attempts
-- ARGV[7] back-off base, ms (attempt n failed: next attempt after base * 2^(n-1))
-- ARGV[8] back-off cap, ms
-- ARGV[9] how long a Delivered record is kept, ms
-- ARGV[10] how long a Dead record is kept, ms
-- Returns: {1, now, status, next_attempt_at_ms}  settled (status Delivered / Retrying /
--                                                 Dead; next 0 unless Retrying)
--          {0, now}  the claim token is not the current one (lease lost); nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[2], 'claim_token') ~= ARGV[2] then return {0, now} end
redis.call('HDEL', KEYS[2], 'claim_token')
local attempts = tonumber(redis.call('HGET', KEYS[2], 'attempts'))
local history = cjson.decode(redis.call('HGET', KEYS[2], 'attempt_log') or '[]')
table.insert(history, {attempt = attempts, started_at_ms = tonumber(redis.call('HGET', KEYS[2], 'last_attempt_at_ms')),
  settled_at_ms = now, outcome = ARGV[3], http_status = ARGV[4], error = ARGV[5]})
while #history > 20 do table.remove(history, 1) end
redis.call('HSET', KEYS[2], 'attempt_log', cjson.encode(history))
if ARGV[3] == 'delivered' then
  redis.call('HSET', KEYS[2], 'status', 'Delivered', 'delivered_at_ms', now)
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[9])
  return {1, now, 'Delivered', 0}
end
redis.call('HSET', KEYS[2], 'last_error', ARGV[5])
if attempts >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[2], 'status', 'Dead', 'dead_at_ms', now)
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[3], now, ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[10]))
  redis.call('PEXPIRE', KEYS[2], ARGV[10])
  return {1, now, 'Dead', 0}
end
local delay = tonumber(ARGV[7])
for _ = 2, attempts do
  delay = math.min(delay * 2, tonumber(ARGV[8]))
end
delay = math.min(delay, tonumber(ARGV[8]))
local next_at = now + delay
redis.call('ZADD', KEYS[1], next_at, ARGV[1])
redis.call('HSET', KEYS[2], 'status', 'Retrying', 'next_attempt_at_ms', next_at)
return {1, now, 'Retrying', next_at}
