-- operation_settle: record how a step's operation ended or how its uncertainty was settled
-- (see operation_begin for the record). Only the holder of the step's current claim token
-- may settle. A human decision is consumed with it: the step's stored human input is dropped
-- in the same transition, so a later doubt asks again instead of reusing the old answer.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] token (HASH step -> current claim token)
-- KEYS[2] operations (HASH step -> JSON {name: record})
-- KEYS[3] human_input (HASH step -> submitted input JSON)
-- ARGV[1] step  ARGV[2] operation name  ARGV[3] claim token
-- ARGV[4] state: started | uncertain | done | failed   ARGV[5] settled_by ('' keeps it)
-- ARGV[6] '1': drop the step's stored human input
-- Returns: {1, record}  applied
--          {0}          the step's claim is not this token's: nothing changed
--          {-1}         no such operation
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[3] then return {0} end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then return {-1} end
local ops = cjson.decode(raw)
local rec = ops[ARGV[2]]
if not rec then return {-1} end
rec.state = ARGV[4]
rec.token = ARGV[3]
if ARGV[5] ~= '' then rec.settled_by = ARGV[5] end
if ARGV[4] == 'started' then
  rec.started_at_ms = now
  rec.attempts = rec.attempts + 1
end
rec.updated_at_ms = now
ops[ARGV[2]] = rec
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(ops))
if ARGV[6] == '1' then redis.call('HDEL', KEYS[3], ARGV[1]) end
return {1, cjson.encode(rec)}
