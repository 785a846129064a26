-- finalize_execution: move a converged execution to its terminal status exactly once.
-- Converged = nothing Running and (nothing Ready/WaitingForRetry, or control is
-- Cancelling/Cancelled). Cancellation overrides natural completion.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] control
-- Returns: {1, now, final_status}   finalized by this call
--          {0, now, final_status}   was already terminal (idempotent no-op)
--          {-1, now}                execution missing
--          {-3, now}                not converged yet
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {-1, now} end
if current ~= 'Running' then return {0, now, current} end
if redis.call('ZCARD', KEYS[4]) > 0 then return {-3, now} end
local control = redis.call('HGET', KEYS[5], 'status')
local cancelled = control == 'Cancelling' or control == 'Cancelled'
if not cancelled and redis.call('ZCARD', KEYS[3]) > 0 then return {-3, now} end
local final = 'Completed'
if cancelled then
  final = 'Cancelled'
  redis.call('HSET', KEYS[5], 'status', 'Cancelled', 'updated_at_ms', now)
  redis.call('HINCRBY', KEYS[5], 'version', 1)
else
  local statuses = redis.call('HVALS', KEYS[2])
  for _, s in ipairs(statuses) do
    if s ~= 'Completed' then final = 'Failed' break end
  end
end
redis.call('HSET', KEYS[1], 'status', final, 'finalized_at_ms', now)
return {1, now, final}
