-- renew_step_lease: extend the lease of a Running step for its current claim-token holder,
-- so a step that legitimately runs longer than one lease is not recovered as stale.
-- KEYS[1] status  KEYS[2] running (ZSET step -> lease-until ms)  KEYS[3] token
-- ARGV[1] step   ARGV[2] claim token   ARGV[3] lease ms
-- Returns: {1, lease_until_ms} renewed
--          {0, now} not renewed: the step is no longer Running under this token (it was
--          recovered, completed or failed); the caller's later transition will be rejected
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local name = ARGV[1]
if redis.call('HGET', KEYS[1], name) ~= 'Running' or redis.call('HGET', KEYS[3], name) ~= ARGV[2] then
  return {0, now}
end
local lease_until = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', lease_until, name)
return {1, lease_until}
