-- schedule_claim_tick: claim one tick of a schedule for firing: one claimer per tick, in tick order.
-- KEYS[1] schedule tick state HASH: fired (ms of the newest tick handled), pending / pending_owner /
--         pending_until / pending_kind (the tick being fired, by whom, until when, why),
--         last_run (the newest run a tick made), queued (queue_one overlap: a tick waiting)
-- ARGV[1] tick (epoch ms)
-- ARGV[2] the watermark the caller planned from (max of `fired` and ARGV[3] as it read them)
-- ARGV[3] floor (epoch ms): the durable record's newest handled tick or resume time
-- ARGV[4] owner (the claiming scheduler)
-- ARGV[5] lease ms
-- ARGV[6] kind (scheduled | catch_up)
-- Returns: {1, fired, last_run}          claimed ARGV[1]
--          {0, fired}                    ARGV[1] is not newer than the newest handled tick
--          {2, fired, pending}           another scheduler's claim is live: nothing changed
--          {3, fired, pending, kind, last_run}  a claim whose lease ended is now the caller's:
--                                        fire that tick (same idempotency key) instead
--          {4, fired}                    the watermark moved since the caller planned: plan again
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'fired', 'pending', 'pending_until', 'pending_kind', 'last_run')
local fired = math.max(tonumber(s[1] or '0'), tonumber(ARGV[3]))
local until_ms = now + tonumber(ARGV[5])
if s[2] then
  if tonumber(s[3]) > now then return {2, fired, s[2]} end
  redis.call('HSET', KEYS[1], 'pending_owner', ARGV[4], 'pending_until', until_ms)
  return {3, fired, s[2], s[4], s[5] or ''}
end
if tonumber(ARGV[1]) <= fired then return {0, fired} end
if tonumber(ARGV[2]) ~= fired then return {4, fired} end
redis.call('HSET', KEYS[1], 'fired', ARGV[2], 'pending', ARGV[1], 'pending_owner', ARGV[4],
  'pending_until', until_ms, 'pending_kind', ARGV[6])
return {1, fired, s[5] or ''}
