-- mark_instance_recovered: close the recovery of an Unsafe runtime instance once all its
-- assigned work was recovered. Its registry record says Recovered (so no reconciler takes
-- it again) and expires after a retention period; its capacity, reservations and recorded
-- predecessors are removed. Only the incarnation that was judged Unsafe is closed: when a
-- new incarnation took the registration over meanwhile, nothing changes.
-- Key layout: every key lives under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry      HASH  incarnation, health, unsafe_at_ms, recovered_at_ms, ...
-- KEYS[2] capacity      HASH  published capacity (deleted)
-- KEYS[3] reservations  ZSET  admission reservations (deleted)
-- KEYS[4] recovery      HASH  per-item recovery claims (expires with the registry record)
-- KEYS[5] predecessors  HASH  superseded incarnations (their work was recovered too: deleted)
-- ARGV[1] retention ms of the Recovered registry record and its recovery claims
-- ARGV[2] the Unsafe incarnation recovery judged
-- Returns: {1, now}          marked Recovered
--          {0, now, health}  not Unsafe (Healthy, already Recovered, or another incarnation
--                            registered since); nothing changed
--          {-1, now}         not registered; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, now} end
local reg = redis.call('HMGET', KEYS[1], 'health', 'incarnation')
local health = reg[1] or 'Healthy'
if health ~= 'Unsafe' or (reg[2] or '') ~= ARGV[2] then return {0, now, health} end
redis.call('HSET', KEYS[1], 'health', 'Recovered', 'recovered_at_ms', now)
redis.call('DEL', KEYS[2], KEYS[3], KEYS[5])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
if redis.call('EXISTS', KEYS[4]) == 1 then redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[1])) end
return {1, now}
