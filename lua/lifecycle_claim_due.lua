-- lifecycle_claim_due: lease the members of a lifecycle schedule whose grace is over, so that
-- one sweeper at a time handles each. A member's score is when its grace started (when its run
-- ended, or its execution was restored); it is due once score <= now - grace. A claim moves the
-- score so the member is due again after the lease: a sweeper that dies half-way leaves it to
-- the next one; the sweeper that finished with it removes it.
-- KEYS[1] schedule  ZSET  member -> grace start ms
-- ARGV[1] grace ms   ARGV[2] lease ms   ARGV[3] maximum number of members to claim
-- Returns: {now, member...} the claimed members, oldest first
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - grace, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {now}
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], now - grace + tonumber(ARGV[2]), member)
  table.insert(out, member)
end
return out
