-- mark_instance_unsafe: the health reconciler's one transition. A registered runtime
-- instance whose last heartbeat is older than the health window becomes Unsafe: admission
-- stops offering it (registry `health`) and its published capacity stops accepting runs.
-- Later heartbeats of that incarnation (a zombie) are refused: publish_capacity fences it.
-- Key layout: both keys live under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry  HASH  descriptor, registered_at_ms, heartbeat_at_ms, health, unsafe_at_ms,
--                         unsafe_reason
-- KEYS[2] capacity  HASH  capacity JSON, can_accept_run (1/0), available_run_slots, ...
-- ARGV[1] health window ms (heartbeat age beyond which the instance is Unsafe)
-- Returns: {1, now, heartbeat_at_ms}   marked Unsafe (unsafe_at_ms = now)
--          {0, now, heartbeat_at_ms}   heartbeat still fresh; nothing changed
--          {-1, now, health}           already Unsafe or Recovered; nothing changed
--          {-2, now}                   not registered; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'heartbeat_at_ms', 'health')
if not state[1] then return {-2, now} end
if state[2] and state[2] ~= 'Healthy' then return {-1, now, state[2]} end
local heartbeat = tonumber(state[1])
if now - heartbeat <= tonumber(ARGV[1]) then return {0, now, heartbeat} end
redis.call('HSET', KEYS[1], 'health', 'Unsafe', 'unsafe_at_ms', now, 'unsafe_reason', 'heartbeat_lapsed')
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'can_accept_run', 0, 'available_run_slots', 0)
end
return {1, now, heartbeat}
