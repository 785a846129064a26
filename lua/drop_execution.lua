-- drop_execution: remove every hot key of a finished execution once it is durable elsewhere.
-- The lifecycle sweeper calls it after the run's record, terminal snapshot, ledger and trace
-- are in the durable store (or for an execution a replay restored, after its grace). A Running
-- execution (including one resumed meanwhile under a new attempt) is never touched.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta  HASH  execution record (its `status` is the guard)
-- KEYS[2..n] every other key of the execution (status, pending, ..., control, human_input)
-- Returns: {1, now, deleted}  dropped (deleted = how many of the keys existed)
--          {0, now, status}   still Running; nothing changed
--          {-1, now}          no meta: the execution's leftover keys (if any) were dropped
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'Running' then return {0, now, status} end
local deleted = 0
for i = 1, #KEYS do
  deleted = deleted + redis.call('DEL', KEYS[i])
end
if not status then return {-1, now} end
return {1, now, deleted}
