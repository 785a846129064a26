-- run_index_swap: compare-and-set of one run-execution index record (a local run's JSON
-- record) by its revision. The instance that owns a local run writes its transitions
-- (Queued -> Running -> terminal) this way, and the recovery reconciler seals a record it
-- takes over this way, so whichever writes first wins: a zombie instance cannot start or
-- finish a local run recovery sealed, and recovery never decides on a record the instance
-- changed meanwhile.
-- Key layout: one key, the record STRING (its own slot).
-- KEYS[1] record  STRING  JSON with a `revision` number (absent = 0)
-- ARGV[1] expected revision   ARGV[2] the new JSON (its revision is the expected one + 1)
-- Returns: {1, now}            swapped
--          {2, now}            the record already is the new JSON (a retried call)
--          {0, now, current}   the record is at another revision; nothing changed
--          {-1, now}           no record; nothing changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local raw = redis.call('GET', KEYS[1])
if not raw then return {-1, now} end
if raw == ARGV[2] then return {2, now} end
local revision = cjson.decode(raw).revision or 0
if revision ~= tonumber(ARGV[1]) then return {0, now, raw} end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return {1, now}
