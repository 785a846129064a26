-- compact_results: apply one retention pass to an execution's hot results, after the caller
-- archived every value it names. A value is replaced (compact) or removed (evict) only when
-- its step is Completed and the hot value is still the one that was archived (sha1 match);
-- eviction additionally needs every step that reads the result to be Completed.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] result
-- ARGV[1] JSON array of {step, action: "compact"|"evict", sha1, ref (compact: JSON text),
--         readers (evict: step names)}
-- Side effects on meta: retention_completed_at = completed_count, retention_passes + 1,
--         retention_last_ms = now.
-- Returns: {1, now, compacted, evicted, skipped}   pass applied
--          {-1, now}                               execution missing (nothing changed)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, now} end
local compacted, evicted, skipped = 0, 0, 0
for _, action in ipairs(cjson.decode(ARGV[1])) do
  local current = redis.call('HGET', KEYS[3], action.step)
  local applicable = current and redis.call('HGET', KEYS[2], action.step) == 'Completed'
    and redis.sha1hex(current) == action.sha1
  if applicable and action.action == 'evict' then
    for _, reader in ipairs(action.readers) do
      if redis.call('HGET', KEYS[2], reader) ~= 'Completed' then applicable = false break end
    end
  end
  if not applicable then
    skipped = skipped + 1
  elseif action.action == 'compact' then
    redis.call('HSET', KEYS[3], action.step, action.ref)
    compacted = compacted + 1
  else
    redis.call('HDEL', KEYS[3], action.step)
    evicted = evicted + 1
  end
end
redis.call('HSET', KEYS[1], 'retention_completed_at', redis.call('HGET', KEYS[1], 'completed_count') or 0,
  'retention_last_ms', now)
redis.call('HINCRBY', KEYS[1], 'retention_passes', 1)
return {1, now, compacted, evicted, skipped}
