-- assist_post: an execution asks for assistance on one board (or withdraws from it). A board
-- is a ZSET per visibility scope ('shared', 'tenant:<id>', 'group:<id>'): an execution is
-- posted on the boards whose instances may serve its tenant, and an idle runtime instance
-- reads only the boards of its own scope (assist_wanted). An entry expires on its own unless
-- its owner posts it again (it does while the execution still has more ready steps than its
-- workers); expired entries are dropped here and by assist_wanted.
-- Key layout: KEYS[1] lives under the board's own hash tag {assist:<scope>}.
-- KEYS[1] board (ZSET execution id -> wanted-until ms)
-- ARGV[1] execution id  ARGV[2] for how long (ms); 0 withdraws the entry
-- Returns: {1, now, wanted_until_ms} posted | {0, now} withdrawn
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ttl <= 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {0, now}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
return {1, now, now + ttl}
