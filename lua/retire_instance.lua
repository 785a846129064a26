-- retire_instance: an incarnation of a runtime instance stops (SIGTERM, scale-in, shutdown).
-- Without work left it removes its registration; with local runs it did not finish (their
-- DAGs stay in Redis) it hands them over at once: it marks itself Unsafe (reason `stopped`)
-- so the recovery reconciler resumes them elsewhere, or in the next incarnation, without
-- waiting for the health window. A registration held by another incarnation, or already
-- fenced, is left alone. A registration with predecessors still being recovered is handed
-- over too, so their work is never orphaned by the removal.
-- Key layout: every key lives under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry      HASH  incarnation, health, unsafe_at_ms, unsafe_reason, ...
-- KEYS[2] capacity      HASH  published capacity
-- KEYS[3] reservations  ZSET  admission reservations
-- KEYS[4] predecessors  HASH  superseded incarnation -> cutoff ms
-- ARGV[1] incarnation   ARGV[2] 1 when the incarnation leaves unfinished local runs, else 0
-- Returns: {1, now}           registration removed (the caller drops it from the index SET)
--          {2, now}           handed over: Unsafe (stopped), recovery takes the work over
--          {0, now, current}  not this incarnation's healthy registration; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reg = redis.call('HMGET', KEYS[1], 'incarnation', 'health')
if (reg[1] or '') ~= ARGV[1] or (reg[2] and reg[2] ~= 'Healthy') then return {0, now, reg[1] or ''} end
if ARGV[2] == '0' and redis.call('HLEN', KEYS[4]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  return {1, now}
end
redis.call('HSET', KEYS[1], 'health', 'Unsafe', 'unsafe_at_ms', now, 'unsafe_reason', 'stopped')
redis.call('HSET', KEYS[2], 'can_accept_run', 0, 'available_run_slots', 0)
redis.call('DEL', KEYS[3])
return {2, now}
