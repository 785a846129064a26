-- execution_step_counts: how many steps of an execution are in each status, and which ones
-- Failed, counted inside Redis (a status read of a 100,000-step execution returns a few
-- numbers, not its 100,000 statuses). Read-only.
-- KEYS[1] status (HASH step -> status)
-- Returns: {n, status_1, count_1, ..., status_n, count_n, failed step names...}
local counts, failed = {}, {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local status = all[i + 1]
  counts[status] = (counts[status] or 0) + 1
  if status == 'Failed' then table.insert(failed, all[i]) end
end
local out = {0}
for status, count in pairs(counts) do
  table.insert(out, status)
  table.insert(out, count)
  out[1] = out[1] + 1
end
for _, name in ipairs(failed) do table.insert(out, name) end
return out
