-- lib/pending_members: the members of a Pending item's entries in the `by group` and `by
-- priority` indexes of its partition (see lib/pending_index), and of a concurrency key's
-- `admitted` and `waiting` sets (lib/flow_keys), which order their runs the same ways under
-- the key instead of the group. Touches no key.
local DEFAULT_PRIORITY = 5

-- "<prefix>\31<seq, 20 digits>\31<run>": in queue order under `prefix`.
local function turn_member(srun, prefix, seq)
  return prefix .. '\31' .. string.format('%020d', seq) .. '\31' .. srun
end

-- "<prefix>\31<9 - priority>\31<arrival, 20 digits>\31<run>": highest priority first, then
-- oldest arrival, under `prefix`.
local function ranked_member(srun, prefix, item)
  local rank = 9 - (tonumber(item.priority) or DEFAULT_PRIORITY)
  local arrival = tonumber(item.arrival or item.seq)
  return prefix .. '\31' .. rank .. '\31' .. string.format('%020d', arrival) .. '\31' .. srun
end

local function priority_member(srun, item)
  return ranked_member(srun, item.group or '', item)
end
