-- lib/gcra: take one unit from each of several rate limits at once, or from none (the generic
-- cell rate algorithm on the Redis server clock). A limit lets one unit pass every
-- `interval` microseconds, `tolerance` (= (burst - 1) * interval) ahead of that schedule;
-- its state is its theoretical arrival time (TAT, µs), one field of a rates HASH. A field
-- whose TAT is past counts as absent, so the hash may expire once every TAT is past.
-- Needs: RATES (the rates HASH).
-- `cells`: array of {field, interval_us, tolerance_us}; `t`: the script's TIME reply.
-- Returns 0 when every limit took its unit, else {wait_us, field}: the longest wait until
-- all would conform and the limit that asks for it (nothing taken).
local function gcra_take(cells, t)
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local wait, worst, next_tats = 0, nil, {}
  for i, cell in ipairs(cells) do
    local tat = math.max(tonumber(redis.call('HGET', KEYS[RATES], cell[1]) or '0'), now_us)
    local late = tat - tonumber(cell[3]) - now_us
    if late > wait then wait, worst = late, cell[1] end
    next_tats[i] = tat + tonumber(cell[2])
  end
  if worst then return {wait, worst} end
  local keep = 0
  for i, cell in ipairs(cells) do
    redis.call('HSET', KEYS[RATES], cell[1], string.format('%d', next_tats[i]))
    keep = math.max(keep, next_tats[i] - now_us)
  end
  local ttl_ms = math.ceil(keep / 1000) + 1000
  if redis.call('PTTL', KEYS[RATES]) < ttl_ms then redis.call('PEXPIRE', KEYS[RATES], ttl_ms) end
  return 0
end
