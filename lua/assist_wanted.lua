-- assist_wanted: the executions asking for assistance on one board, longest-wanted first
-- (the entry expiring last), after dropping the expired entries (see assist_post).
-- Key layout: KEYS[1] lives under the board's own hash tag {assist:<scope>}.
-- KEYS[1] board (ZSET execution id -> wanted-until ms)
-- ARGV[1] at most this many
-- Returns: {now, execution id...}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1)
local out = {now}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'REV')) do
  table.insert(out, id)
end
return out
