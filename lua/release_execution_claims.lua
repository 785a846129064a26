-- release_execution_claims: recovery of an in-flight execution whose runtime instance became
-- Unsafe. Steps the dead instance left Running (claimed at or before it was marked Unsafe)
-- go back to Ready at once instead of waiting for their lease: the claim token is cleared (a
-- late completion by the old owner is rejected), the retry count is NOT touched, a recovery
-- is counted. Claims made after the cutoff (a replacement's) are left alone. The claim time
-- is the one the claim script recorded, so the lease the claims were made with (whatever
-- engine settings the dead process ran) does not matter; a Running step without a recorded
-- claim time is left to its lease (recover_stale). Fencing: while the meta's
-- owner_local_run_id still names the dead local run it is cleared, so that run's workers (a
-- zombie's) can claim nothing more; the attempt that resumes the execution owns it next.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta  KEYS[2] status  KEYS[3] ready  KEYS[4] running  KEYS[5] token
-- KEYS[6] recoveries  KEYS[7] claimed (HASH step -> claimed-at ms)
-- ARGV[1] cutoff ms: only steps claimed at or before it are released (the Unsafe mark time)
-- ARGV[2] the dead local run id ('' = do not fence)
-- Returns: {now, step...} the released step names (none when the execution is not Running)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
if redis.call('HGET', KEYS[1], 'status') ~= 'Running' then return out end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'owner_local_run_id') == ARGV[2] then
  redis.call('HSET', KEYS[1], 'owner_local_run_id', '')
end
local cutoff = tonumber(ARGV[1])
for _, name in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local claimed_at = tonumber(redis.call('HGET', KEYS[7], name))
  if claimed_at and claimed_at <= cutoff then
    redis.call('ZREM', KEYS[4], name)
    redis.call('HDEL', KEYS[5], name)
    redis.call('HSET', KEYS[2], name, 'Ready')
    redis.call('ZADD', KEYS[3], 0, name)
    redis.call('HINCRBY', KEYS[6], name, 1)
    table.insert(out, name)
  end
end
return out
