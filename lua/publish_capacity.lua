-- publish_capacity: heartbeat of a runtime instance: store its registry descriptor and
-- capacity descriptor with the Redis server time, ignoring out-of-order publishes.
-- Key layout: both keys live under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry  HASH  descriptor (JSON), registered_at_ms, heartbeat_at_ms
-- KEYS[2] capacity  HASH  capacity (JSON), version, can_accept_run (1/0),
--                         available_run_slots, heartbeat_at_ms
-- ARGV[1] version (monotonic per instance process)   ARGV[2] descriptor JSON
-- ARGV[3] capacity JSON   ARGV[4] can_accept_run (1/0)   ARGV[5] available_run_slots
-- Returns: {1, now}  published
--          {0, now}  a newer version is already stored; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stored = redis.call('HGET', KEYS[2], 'version')
if stored and tonumber(stored) > tonumber(ARGV[1]) then return {0, now} end
if redis.call('HEXISTS', KEYS[1], 'registered_at_ms') == 0 then
  redis.call('HSET', KEYS[1], 'registered_at_ms', now)
end
redis.call('HSET', KEYS[1], 'descriptor', ARGV[2], 'heartbeat_at_ms', now)
redis.call('HSET', KEYS[2], 'capacity', ARGV[3], 'version', ARGV[1], 'can_accept_run', ARGV[4],
  'available_run_slots', ARGV[5], 'heartbeat_at_ms', now)
return {1, now}
