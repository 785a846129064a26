-- fence_execution: recovery of a local run whose ExecutionId was chosen but whose DAG does
-- not exist (its instance died, or is a zombie, between recording the ExecutionId and
-- creating the DAG): the ExecutionId is given up, so a late create_execution (the
-- zombie's) is refused and the run can be dispatched afresh without ever running twice.
-- The tombstone expires after ARGV[2] ms: a zombie frozen longer than that between recording
-- the ExecutionId and creating the DAG is no longer refused.
-- Key layout: both keys live under the execution's hash tag {<execution id>}.
-- KEYS[1] meta    HASH    the execution record (must not exist)
-- KEYS[2] fenced  STRING  the reason the ExecutionId was given up
-- ARGV[1] reason   ARGV[2] how long the tombstone lasts (ms)
-- Returns: {1, now}          fenced (or already fenced)
--          {0, now, status}  the DAG exists (created meanwhile): nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local status = redis.call('HGET', KEYS[1], 'status')
if status then return {0, now, status} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {1, now}
