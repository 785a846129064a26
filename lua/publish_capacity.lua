-- publish_capacity: heartbeat of one incarnation of a runtime instance: store its registry
-- descriptor and capacity descriptor with the Redis server time. Fencing: a heartbeat is
-- refused when another incarnation registered the instance id since (this one was
-- superseded), when the health reconciler marked this incarnation Unsafe or Recovered (a
-- zombie that was paused past the health window), or when no registration exists (the Redis
-- dataset was lost, or a Recovered record expired); the caller then stops taking work, or
-- re-registers after a lost dataset. Versions are compared only within one incarnation, so
-- out-of-order publishes of the same process are ignored and a new process starts afresh.
-- The run slots dispatchers reserved for runs this capacity already counts (the instance
-- accepted them) are released with it: a reservation covers exactly the time between a
-- dispatcher's reserve and the first published capacity that includes its run.
-- Capacity freed (the instance can accept a run and has more free run slots than it last
-- published, or could not accept one before) is announced on the capacity channel, so the
-- pumps of every control plane dispatch now instead of after their idle interval.
-- Key layout: every key lives under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry      HASH  incarnation, descriptor (JSON), registered_at_ms, heartbeat_at_ms, health
-- KEYS[2] capacity      HASH  incarnation, capacity (JSON), version, can_accept_run (1/0),
--                             available_run_slots, heartbeat_at_ms
-- KEYS[3] reservations  ZSET  holder (shared run id) -> expires-at ms (see reserve_capacity)
-- ARGV[1] incarnation   ARGV[2] version (monotonic per incarnation)   ARGV[3] descriptor JSON
-- ARGV[4] capacity JSON   ARGV[5] can_accept_run (1/0)   ARGV[6] available_run_slots
-- ARGV[7] JSON array of holders to release (runs the capacity counts; "[]": none)
-- ARGV[8] the capacity channel (pub/sub: not a key)   ARGV[9] the runtime instance id (its message)
-- Returns: {1, now}              published (the holders released)
--          {0, now}              a newer version of this incarnation is stored (it counts the
--                                runs too: the holders are released); nothing else changed
--          {-1, now, current}    superseded by incarnation `current`; nothing changed
--          {-2, now, health}     this incarnation is Unsafe or Recovered; nothing changed
--          {-3, now}             not registered; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reg = redis.call('HMGET', KEYS[1], 'incarnation', 'health', 'registered_at_ms')
if not reg[3] then return {-3, now} end
if (reg[1] or '') ~= ARGV[1] then return {-1, now, reg[1] or ''} end
if reg[2] and reg[2] ~= 'Healthy' then return {-2, now, reg[2]} end
local stored = redis.call('HMGET', KEYS[2], 'incarnation', 'version', 'can_accept_run', 'available_run_slots')
for _, holder in ipairs(cjson.decode(ARGV[7])) do redis.call('ZREM', KEYS[3], holder) end
if stored[1] == ARGV[1] and stored[2] and tonumber(stored[2]) > tonumber(ARGV[2]) then
  return {0, now}
end
redis.call('HSET', KEYS[1], 'descriptor', ARGV[3], 'heartbeat_at_ms', now)
redis.call('HSET', KEYS[2], 'incarnation', ARGV[1], 'capacity', ARGV[4], 'version', ARGV[2],
  'can_accept_run', ARGV[5], 'available_run_slots', ARGV[6], 'heartbeat_at_ms', now)
if ARGV[5] == '1' and (stored[3] ~= '1' or tonumber(ARGV[6]) > tonumber(stored[4] or 0)) then
  redis.call('PUBLISH', ARGV[8], ARGV[9])
end
return {1, now}
