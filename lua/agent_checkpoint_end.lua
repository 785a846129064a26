-- agent_checkpoint_end: record how a sub-step of an agent step ended (see agent_checkpoint_begin
-- for the record), or a human's decision on it. Only the holder of the step's current claim
-- token may end it. An answer used for the decision is consumed in the same transition: the
-- step's stored human input is dropped, so the next question asks again.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] token        HASH step -> current claim token
-- KEYS[2] agents       HASH `<step>:<seq>` -> record JSON
-- KEYS[3] human_input  HASH step -> submitted input JSON
-- ARGV[1] step  ARGV[2] claim token  ARGV[3] seq  ARGV[4] state (completed | failed | refused |
--         approved)  ARGV[5] JSON object of fields to set (output, usage, error, approval, ...)
-- ARGV[6] '1': drop the step's stored human input
-- Returns: {1, record}  applied (ended_at_ms set for every state but approved)
--          {0}          the step's claim is not this token's: nothing changed
--          {-1}         no such sub-step
--          {-2, record} the sub-step is already final: nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local step, token, seq, state = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('HGET', KEYS[1], step) ~= token then return {0} end
local field = step .. ':' .. seq
local raw = redis.call('HGET', KEYS[2], field)
if not raw then return {-1} end
local record = cjson.decode(raw)
if record.state ~= 'started' and record.state ~= 'awaiting_approval' and record.state ~= 'approved' then
  return {-2, raw}
end
for name, value in pairs(cjson.decode(ARGV[5])) do record[name] = value end
record.state, record.token = state, token
if state ~= 'approved' then record.ended_at_ms = now end
local encoded = cjson.encode(record)
redis.call('HSET', KEYS[2], field, encoded)
if ARGV[6] == '1' then redis.call('HDEL', KEYS[3], step) end
return {1, encoded}
