-- lib/finalize: move a converged execution to its terminal status exactly once.
-- Converged = nothing Running and (nothing Ready/WaitingForRetry, or control is
-- Cancelling/Cancelled). Cancellation overrides natural completion; otherwise any step not
-- Completed makes it Failed. The finalization time is `now` (stored as finalized_at_ms).
-- Needs: META, STATUS, READY, RUNNING, CONTROL (the execution's keys); the execution exists.
-- Returns 1, final status (finalized by this call) | 0, status (already terminal: a no-op) |
--         -3 (not converged yet)
local function finalize_converged(now)
  local current = redis.call('HGET', KEYS[META], 'status')
  if current ~= 'Running' then return 0, current end
  if redis.call('ZCARD', KEYS[RUNNING]) > 0 then return -3 end
  local control = redis.call('HGET', KEYS[CONTROL], 'status')
  local cancelled = control == 'Cancelling' or control == 'Cancelled'
  if not cancelled and redis.call('ZCARD', KEYS[READY]) > 0 then return -3 end
  local final = 'Completed'
  if cancelled then
    final = 'Cancelled'
    redis.call('HSET', KEYS[CONTROL], 'status', 'Cancelled', 'updated_at_ms', now)
    redis.call('HINCRBY', KEYS[CONTROL], 'version', 1)
  else
    for _, s in ipairs(redis.call('HVALS', KEYS[STATUS])) do
      if s ~= 'Completed' then final = 'Failed' break end
    end
  end
  redis.call('HSET', KEYS[META], 'status', final, 'finalized_at_ms', now)
  return 1, final
end
