-- lib/assistant_lease: may this claimer write to the execution? A claimer '@<assistant>' is a
-- runtime instance assisting the execution (see assist_join): its claims, completions and
-- failures are refused once its assistance lease lapsed (or it left), so an assisting instance
-- that lost its lease (fenced, partitioned, paused) changes nothing; its claimed steps stay
-- Running until their own lease lapses and stale-running recovery takes them back. Any other
-- claimer ('' or a local run id) is not an assistant: nil, the caller checks ownership itself.
-- Needs: ASSISTANTS (the execution's `assistants` ZSET: assistant -> lease-until ms).
local function assistant_refusal(claimer, now)
  if string.sub(claimer, 1, 1) ~= '@' then return nil end
  local lease = redis.call('ZSCORE', KEYS[ASSISTANTS], string.sub(claimer, 2))
  if lease and tonumber(lease) >= now then return nil end
  return 'assistance lease lapsed'
end
