-- close_predecessors: the recovery reconciler took over every local run of the listed
-- superseded incarnations of a runtime instance; forget them, while the incarnation that
-- superseded them still holds the registration (otherwise the next judgement decides).
-- Key layout: both keys live under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] registry      HASH  incarnation
-- KEYS[2] predecessors  HASH  superseded incarnation -> cutoff ms
-- ARGV[1] the live incarnation recovery judged   ARGV[2..n] superseded incarnations to forget
-- Returns: {n, now}   n predecessors forgotten (0 when the live incarnation changed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if (redis.call('HGET', KEYS[1], 'incarnation') or '') ~= ARGV[1] then return {0, now} end
local closed = 0
for i = 2, #ARGV do
  closed = closed + redis.call('HDEL', KEYS[2], ARGV[i])
end
return {closed, now}
