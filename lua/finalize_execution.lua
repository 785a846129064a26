-- finalize_execution: move a converged execution to its terminal status exactly once (see
-- lib/finalize; advance_steps does the same when the completions it applies converge it).
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] control
-- Returns: {1, now, final_status}   finalized by this call
--          {0, now, final_status}   was already terminal (idempotent no-op)
--          {-1, now}                execution missing
--          {-3, now}                not converged yet
local META, STATUS, READY, RUNNING, CONTROL = 1, 2, 3, 4, 5
-- include: finalize
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[META]) == 0 then return {-1, now} end
local code, final = finalize_converged(now)
if code == -3 then return {-3, now} end
return {code, now, final}
