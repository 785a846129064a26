-- lib/queue_clock: the next sequence of a shared-queue partition's clock. It counts
-- microseconds and strictly increases (max(last + 1, now)), so the heads of different
-- partitions compare by the time their runs were queued (a burst drifts it ahead only past
-- one run per microsecond). Stored as integer text: cjson keeps 14 digits of a number, the
-- clock has 16.
-- Needs: QUEUE_CLOCK (the partition's `seq` STRING); `t`: the script's TIME reply.
local function next_queue_seq(t)
  local seq = math.max(tonumber(redis.call('GET', KEYS[QUEUE_CLOCK]) or '0') + 1,
    tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('SET', KEYS[QUEUE_CLOCK], string.format('%d', seq))
  return seq
end
