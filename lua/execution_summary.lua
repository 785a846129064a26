-- execution_summary: what a status read of an execution shows first, counted inside Redis
-- whatever the execution's size: its metadata (without the pipeline's text when the caller
-- already holds that execution's pipeline), its control status and waiting input, how many
-- steps are in each status (a walk of every status: asked for with a run's first page only,
-- so paging through a run stays linear), and the Failed steps with their last errors (found
-- among the steps that have an error). Read-only.
-- KEYS[1] meta  KEYS[2] control  KEYS[3] status (HASH step -> status)  KEYS[4] error
-- ARGV[1] '1': leave the meta's `pipeline` field out   ARGV[2] '1': count the steps per status
-- Returns: {} when the execution is missing, else
--          {meta field / value pairs, {control status, waiting_key, waiting_step, reason,
--           updated_at_ms},
--           {status_1, count_1, ...}, {failed step, its last error (JSON or false), ...}}
local meta = redis.call('HGETALL', KEYS[1])
if #meta == 0 then return {} end
if ARGV[1] == '1' then
  local kept = {}
  for i = 1, #meta, 2 do
    if meta[i] ~= 'pipeline' then
      table.insert(kept, meta[i])
      table.insert(kept, meta[i + 1])
    end
  end
  meta = kept
end
local control = redis.call('HMGET', KEYS[2], 'status', 'waiting_key', 'waiting_step', 'reason', 'updated_at_ms')
local failed, counted = {}, {}
local errors = redis.call('HGETALL', KEYS[4])
for i = 1, #errors, 2 do
  if redis.call('HGET', KEYS[3], errors[i]) == 'Failed' then
    table.insert(failed, errors[i])
    table.insert(failed, errors[i + 1])
  end
end
if ARGV[2] == '1' then
  local counts = {}
  local statuses = redis.call('HVALS', KEYS[3])
  for _, status in ipairs(statuses) do counts[status] = (counts[status] or 0) + 1 end
  for status, count in pairs(counts) do
    table.insert(counted, status)
    table.insert(counted, count)
  end
end
return {meta, control, counted, failed}
