-- control_cas: apply one execution-control action by compare-and-set on the control version.
-- The transition table lives here; no other code writes the control hash (finalize_execution
-- only seals Cancelling -> Cancelled when it finalizes).
-- KEYS[1] control      HASH status, action, version, waiting_key, waiting_step, reason, updated_at_ms
-- KEYS[2] meta         HASH execution record (must exist and be Running)
-- KEYS[3] running      ZSET steps currently claimed (Pause / Drain settle on it being empty)
-- KEYS[4] human_input  HASH step -> submitted input JSON
-- ARGV[1] expected control version (0 when no control state exists yet; -1: whatever the
--         current version is, for the runtime's own actions, which never race on purpose)
-- ARGV[2] action: Pause | Resume | Cancel | WaitForInput | SubmitInput (callers)
--                 Drain (Pausing -> Paused once nothing runs) | Advance (Resuming -> Running) (runtime)
-- ARGV[3] waiting key (WaitForInput, SubmitInput)   ARGV[4] waiting step (WaitForInput)
-- ARGV[5] reason (free text; kept as is by the runtime actions)   ARGV[6] input JSON (SubmitInput)
-- Pause with nothing running goes straight to Paused; settled statuses store action None.
-- Returns: {1, now, fields...}   applied; fields = the control hash after the change (HGETALL)
--          {2, now, fields...}   already in the requested state (WaitForInput, same key): no change
--          {-1, now}             execution missing
--          {-2, now, exec_status} execution already terminal
--          {-3, now, fields...}  expected version is stale
--          {-4, now, fields...}  action not allowed from the current status
--          {-5, now, fields...}  waiting key does not match
--          {-6, now, fields...}  Drain: steps are still running
--          {-7, now}             unknown action
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local transitions = {
  Pause = {None = 'Pausing', Running = 'Pausing', Resuming = 'Pausing'},
  Resume = {Pausing = 'Resuming', Paused = 'Resuming'},
  Cancel = {None = 'Cancelling', Running = 'Cancelling', Pausing = 'Cancelling', Paused = 'Cancelling',
            Resuming = 'Cancelling', WaitingForInput = 'Cancelling'},
  WaitForInput = {None = 'WaitingForInput', Running = 'WaitingForInput', Resuming = 'WaitingForInput'},
  SubmitInput = {WaitingForInput = 'Resuming'},
  Drain = {Pausing = 'Paused'},
  Advance = {Resuming = 'Running'},
}
local action = ARGV[2]
local allowed = transitions[action]
if not allowed then return {-7, now} end
local exec_status = redis.call('HGET', KEYS[2], 'status')
if not exec_status then return {-1, now} end
if exec_status ~= 'Running' then return {-2, now, exec_status} end

local function reply(code)
  local out = {code, now}
  for _, item in ipairs(redis.call('HGETALL', KEYS[1])) do table.insert(out, item) end
  return out
end

local status = redis.call('HGET', KEYS[1], 'status') or 'None'
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local expected = tonumber(ARGV[1])
if expected ~= -1 and expected ~= version then return reply(-3) end
if action == 'WaitForInput' and status == 'WaitingForInput'
    and redis.call('HGET', KEYS[1], 'waiting_key') == ARGV[3]
    and redis.call('HGET', KEYS[1], 'waiting_step') == ARGV[4] then
  return reply(2)
end
local target = allowed[status]
if not target then return reply(-4) end
local running = redis.call('ZCARD', KEYS[3])
if action == 'Drain' and running > 0 then return reply(-6) end
if action == 'Pause' and running == 0 then target = 'Paused' end
local runtime_action = action == 'Drain' or action == 'Advance'
local stored_action = action
if runtime_action or target == 'Paused' then stored_action = 'None' end
if action == 'SubmitInput' then
  if redis.call('HGET', KEYS[1], 'waiting_key') ~= ARGV[3] then return reply(-5) end
  redis.call('HSET', KEYS[4], redis.call('HGET', KEYS[1], 'waiting_step'), ARGV[6])
  redis.call('HDEL', KEYS[1], 'waiting_key', 'waiting_step')
end
if action == 'WaitForInput' then
  redis.call('HSET', KEYS[1], 'waiting_key', ARGV[3], 'waiting_step', ARGV[4])
end
redis.call('HSET', KEYS[1], 'status', target, 'action', stored_action, 'version', version + 1,
  'updated_at_ms', now)
if not runtime_action then redis.call('HSET', KEYS[1], 'reason', ARGV[5]) end
return reply(1)
