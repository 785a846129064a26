-- operation_begin: record a step's operation id before its call to a peer goes out, or find
-- that an earlier claim's call may have taken effect (uncertain). Only the holder of the
-- step's current claim token may begin. Per step, the operations hash keeps one JSON object
-- {name: record}; a record is {id, state, token, attempts, started_at_ms, uncertain_count,
-- uncertain_since_ms, settled_by}. States: started (a call may be in flight under `token`),
-- uncertain (an earlier claim's call may have taken effect), done, failed (the peer answered
-- a failure: a new call may go out under the same id).
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] token (HASH step -> current claim token)
-- KEYS[2] operations (HASH step -> JSON {name: record})
-- ARGV[1] step  ARGV[2] operation name  ARGV[3] claim token  ARGV[4] operation id for a new record
-- Returns: {'lost'}                         the step's claim is not this token's: nothing changed
--          {'fresh', record}               the call may go out under record.id
--          {'uncertain', record, newly}    an earlier claim's call may have taken effect (newly = 1
--                                          for the claim that found it first)
--          {'done', record}                it completed under an earlier claim
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[3] then return {'lost'} end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
local ops = {}
if raw then ops = cjson.decode(raw) end
local rec = ops[ARGV[2]]
local outcome, newly = 'fresh', 0
if not rec then
  rec = {id = ARGV[4], state = 'started', token = ARGV[3], attempts = 1, started_at_ms = now,
         uncertain_count = 0}
elseif rec.state == 'done' then
  outcome = 'done'
elseif rec.state == 'failed' then
  rec.state, rec.token, rec.started_at_ms = 'started', ARGV[3], now
  rec.attempts = rec.attempts + 1
elseif rec.state == 'started' and rec.token == ARGV[3] then
  outcome = 'fresh'
elseif rec.state == 'started' then
  rec.state, rec.token, rec.uncertain_since_ms = 'uncertain', ARGV[3], now
  rec.uncertain_count = rec.uncertain_count + 1
  rec.settled_by = nil
  outcome, newly = 'uncertain', 1
else
  rec.token = ARGV[3]
  outcome = 'uncertain'
end
ops[ARGV[2]] = rec
local encoded = cjson.encode(ops)
if encoded ~= raw then redis.call('HSET', KEYS[2], ARGV[1], encoded) end
return {outcome, cjson.encode(rec), newly}
