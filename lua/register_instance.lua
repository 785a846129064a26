-- register_instance: a runtime instance starts a new incarnation (one start of the process
-- that hosts it) under its RuntimeInstanceId. Registration is not identity: when another
-- incarnation holds the id (a killed or stopped predecessor, or a zombie), this one takes the
-- registration over. The predecessor is recorded (unless its work was already Recovered) so
-- the recovery reconciler takes its local runs over, its reservations are dropped, its health
-- marks are cleared and heartbeat versions start again: they are compared only within one
-- incarnation. The predecessor's later heartbeats are refused (publish_capacity).
-- Key layout: every key lives under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry      HASH  incarnation, descriptor, registered_at_ms, heartbeat_at_ms, health,
--                             unsafe_at_ms, unsafe_reason, recovered_at_ms
-- KEYS[2] capacity      HASH  incarnation, capacity JSON, version, can_accept_run,
--                             available_run_slots, heartbeat_at_ms
-- KEYS[3] reservations  ZSET  admission reservations (of the predecessor: dropped)
-- KEYS[4] predecessors  HASH  superseded incarnation -> cutoff ms (its claims were made before)
-- ARGV[1] incarnation   ARGV[2] version   ARGV[3] descriptor JSON   ARGV[4] capacity JSON
-- ARGV[5] can_accept_run (1/0)   ARGV[6] available_run_slots
-- Returns: {1, now, predecessor}  registered; predecessor = the superseded incarnation whose
--                                 work recovery takes over ('' when none)
--          {-2, now, health}      this incarnation is registered and fenced (Unsafe or
--                                 Recovered); nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reg = redis.call('HMGET', KEYS[1], 'incarnation', 'health', 'unsafe_at_ms', 'registered_at_ms')
local predecessor = ''
if not reg[4] then
  redis.call('HSET', KEYS[1], 'registered_at_ms', now)
elseif (reg[1] or '') == ARGV[1] then
  if reg[2] and reg[2] ~= 'Healthy' then return {-2, now, reg[2]} end
else
  local health = reg[2] or 'Healthy'
  if health ~= 'Recovered' then
    local cutoff = now
    if health == 'Unsafe' and reg[3] then cutoff = tonumber(reg[3]) end
    predecessor = reg[1] or ''
    redis.call('HSET', KEYS[4], predecessor, cutoff)
  end
  redis.call('HDEL', KEYS[1], 'health', 'unsafe_at_ms', 'unsafe_reason', 'recovered_at_ms')
  redis.call('PERSIST', KEYS[1])
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('HSET', KEYS[1], 'registered_at_ms', now)
end
redis.call('HSET', KEYS[1], 'incarnation', ARGV[1], 'descriptor', ARGV[3], 'heartbeat_at_ms', now)
redis.call('HSET', KEYS[2], 'incarnation', ARGV[1], 'capacity', ARGV[4], 'version', ARGV[2],
  'can_accept_run', ARGV[5], 'available_run_slots', ARGV[6], 'heartbeat_at_ms', now)
return {1, now, predecessor}
