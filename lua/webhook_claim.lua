-- webhook_claim: take one due delivery for one attempt, under a lease.
-- The attempt is counted at claim time, so a deliverer that dies mid-request still used it;
-- its lease then runs out and another deliverer claims the delivery again.
-- Key layout: every key lives under the hash tag {webhooks} (one slot, Cluster safe).
-- KEYS[1] due        ZSET  delivery id -> when it may be (re)attempted, ms
-- KEYS[2] delivery   HASH  {webhooks}:delivery:<delivery id>
-- ARGV[1] delivery id
-- ARGV[2] lease, ms (the due score becomes now + lease while the attempt runs)
-- ARGV[3] claim token (only its holder may settle the attempt)
-- Returns: {1, now, attempt}  claimed; attempt = this attempt's number (1-based)
--          {0, now}           not due (not in the due set, or due later)
--          {-1, now}          the delivery record is gone; its due entry is removed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > now then return {0, now} end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {-1, now}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local attempt = redis.call('HINCRBY', KEYS[2], 'attempts', 1)
redis.call('HSET', KEYS[2], 'claim_token', ARGV[3], 'last_attempt_at_ms', now)
return {1, now, attempt}
