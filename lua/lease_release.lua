-- lease_release: give back one concurrency lease in every scope ZSET.
--
-- KEYS[1..n]  scope ZSETs the lease was acquired in; one hash tag (the gate calls it once
--             per scope: every scope has its own tag)
-- ARGV[1]     lease id
--
-- Returns the number of scopes the lease was still held in (n = all released; fewer means
-- the lease had already expired or been evicted in some scopes).

local released = 0
for _, key in ipairs(KEYS) do
  released = released + redis.call('ZREM', key, ARGV[1])
end
return released
