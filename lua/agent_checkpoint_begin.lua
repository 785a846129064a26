-- agent_checkpoint_begin: record that a sub-step of an agent step (a model turn or a tool call)
-- starts, before anything goes out. Only the holder of the step's current claim token may
-- begin. Per agent step, the agents hash keeps `<step>:n` (how many sub-steps exist) and
-- `<step>:<seq>` (one JSON record per sub-step: seq, kind, state, token, attempts,
-- started_at_ms, ended_at_ms, and what the caller stored: input, output, usage, approval, ...).
-- Sub-steps are appended in order; a record that is not final yet (started, awaiting_approval,
-- approved) is taken over by a later claim (its token replaced, attempts counted).
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] token   HASH step -> current claim token
-- KEYS[2] agents  HASH (fields above)
-- ARGV[1] step  ARGV[2] claim token  ARGV[3] seq  ARGV[4] state to record
-- ARGV[5] JSON object of fields for a new record (kind, input, ...)
-- Returns: {'new', record}        appended at seq
--          {'taken', record, was} an earlier record at seq not final yet; was = its state before
--          {'final', record}      seq is already final: nothing changed
--          {'lost'}               the step's claim is not this token's: nothing changed
--          {'gap', n}             seq is beyond the next sub-step (n exist): nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local step, token, seq, state = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if redis.call('HGET', KEYS[1], step) ~= token then return {'lost'} end
local count = tonumber(redis.call('HGET', KEYS[2], step .. ':n') or '0')
local field = step .. ':' .. seq
if seq == count then
  local record = cjson.decode(ARGV[5])
  record.seq, record.state, record.token, record.attempts, record.started_at_ms = seq, state, token, 1, now
  local encoded = cjson.encode(record)
  redis.call('HSET', KEYS[2], field, encoded, step .. ':n', count + 1)
  return {'new', encoded}
end
if seq > count then return {'gap', count} end
local record = cjson.decode(redis.call('HGET', KEYS[2], field))
if record.state ~= 'started' and record.state ~= 'awaiting_approval' and record.state ~= 'approved' then
  return {'final', cjson.encode(record)}
end
local was = record.state
if record.token ~= token then record.attempts = record.attempts + 1 end
record.state, record.token = state, token
if was ~= state then record.started_at_ms = now end
local encoded = cjson.encode(record)
redis.call('HSET', KEYS[2], field, encoded)
return {'taken', encoded, was}
