-- lib/pending_members: the members of a Pending item's entries in the `by group` and `by
-- priority` indexes of its partition (see lib/pending_index). Touches no key.
local DEFAULT_PRIORITY = 5

local function turn_member(srun, group, seq)
  return group .. '\31' .. string.format('%020d', seq) .. '\31' .. srun
end

local function priority_member(srun, item)
  local rank = 9 - (tonumber(item.priority) or DEFAULT_PRIORITY)
  local arrival = tonumber(item.arrival or item.seq)
  return (item.group or '') .. '\31' .. rank .. '\31' .. string.format('%020d', arrival) .. '\31' .. srun
end
