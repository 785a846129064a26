-- shared_expire_claims: a control plane that starts again expires the queue claims its
-- previous life (same claimer name, another incarnation) still holds, so their items are
-- claimed again at once (their dispatch attempts then settled by the next claimer) instead
-- of after the claim lease. Only the claims' lease deadlines change: shared_claim_next does
-- the rest exactly as for any expired claim.
-- Key layout: every key lives under the hash tag of one shared-queue partition
-- ({squeue}, or {squeue:<k>} for partition k > 0): one slot, Cluster safe.
-- KEYS[1] items    HASH  shared run id -> JSON item (claimed_by "<pump id>/<worker>@<incarnation>")
-- KEYS[2] claimed  ZSET  shared run id -> claim lease-until ms
-- ARGV[1] claimer prefix ("<control plane id>/")   ARGV[2] the current incarnation suffix
-- ("@<incarnation>": claims ending with it are kept)   ARGV[3] most claims to look at
-- Returns: {expired, now}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, suffix = ARGV[1], ARGV[2]
local expired = 0
for _, srun in ipairs(redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1)) do
  local raw = redis.call('HGET', KEYS[1], srun)
  local claimer = raw and cjson.decode(raw).claimed_by
  if type(claimer) == 'string' and string.sub(claimer, 1, #prefix) == prefix
      and string.sub(claimer, -#suffix) ~= suffix then
    redis.call('ZADD', KEYS[2], 0, srun)
    expired = expired + 1
  end
end
return {expired, now}
