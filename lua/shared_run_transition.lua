-- shared_run_transition: create a shared run record, or move it between statuses by
-- compare-and-set on its current status (Submitted -> ScaleOutRequested / Rejected, ...).
-- Queue transitions (QueuedGlobally, Dispatched, Cancelled) have their own scripts.
-- Key layout: every key lives under the hash tag of the run's shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] run record   HASH  {squeue}:run:<shared run id>
-- KEYS[2] tenant runs  ZSET  shared run id -> created-at ms (tenant listing index)
-- KEYS[3] ended        ZSET  shared run id -> ended-at ms: a run moved to Rejected, Cancelled or
--                            Failed ended before dispatch; the lifecycle sweeper retires it
-- KEYS[4] rates        HASH  the partition's submit rate limits (see lib/gcra)
-- KEYS[5] (optional, creation only) idempotency key  HASH {shared_run_id, fingerprint,
--         created_at_ms} {squeue}:idem:<tenant>:<sha256 of the key>, expires after ARGV[7]
-- ARGV[1] shared run id
-- ARGV[2] comma separated expected statuses ("" = the run must not exist: create it)
-- ARGV[3] new status
-- ARGV[4] JSON object of string fields to set
-- ARGV[5] (creation only) JSON array of the submit's rate-limit cells [field, interval_us,
--         tolerance_us] ("[]": none), taken all or none once the run would be created
-- ARGV[6] (with KEYS[5]) fingerprint of the request (pipeline + input)
-- ARGV[7] (with KEYS[5]) idempotency window, ms
-- Returns: {1, now}          applied
--          {0, now, status}  current status not expected (or run already exists); unchanged
--          {-1, now}         run missing (and ARGV[2] not empty); unchanged
--          {2, now, srun}    the idempotency key already made run srun with the same
--                            fingerprint; unchanged
--          {3, now, srun}    the idempotency key made run srun for another request; unchanged
--          {4, now, wait_us, field}  a rate limit (`field`) refused the new run: it conforms
--                            again in wait_us; unchanged
local RATES = 4
-- include: gcra
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local status = redis.call('HGET', KEYS[1], 'status')
if ARGV[2] == '' then
  if KEYS[5] then
    local held = redis.call('HMGET', KEYS[5], 'shared_run_id', 'fingerprint')
    if held[1] then
      if held[2] == ARGV[6] then return {2, now, held[1]} end
      return {3, now, held[1]}
    end
  end
  if status then return {0, now, status} end
  local refused = gcra_take(cjson.decode(ARGV[5]), t)
  if refused ~= 0 then return {4, now, refused[1], refused[2]} end
  redis.call('HSET', KEYS[1], 'created_at_ms', now)
  redis.call('ZADD', KEYS[2], now, ARGV[1])
  if KEYS[5] then
    redis.call('HSET', KEYS[5], 'shared_run_id', ARGV[1], 'fingerprint', ARGV[6], 'created_at_ms', now)
    redis.call('PEXPIRE', KEYS[5], ARGV[7])
  end
else
  if not status then return {-1, now} end
  if not string.find(',' .. ARGV[2] .. ',', ',' .. status .. ',', 1, true) then
    return {0, now, status}
  end
end
local fields = cjson.decode(ARGV[4])
for field, value in pairs(fields) do
  redis.call('HSET', KEYS[1], field, value)
end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'updated_at_ms', now)
if ARGV[3] == 'Rejected' or ARGV[3] == 'Cancelled' or ARGV[3] == 'Failed' then
  redis.call('ZADD', KEYS[3], now, ARGV[1])
end
return {1, now}
