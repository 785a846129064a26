-- assist_leave: an assisting runtime instance leaves an execution (it converged, nothing was
-- claimable any more, it was parked, or the instance stops). Its seat goes (its claims, which
-- it no longer holds, would now be refused) and its record in the meta field `assistance` is
-- closed: left_at_ms, left_reason, and the steps it completed during this stay added to
-- steps_completed. An instance fenced as Unsafe never calls it: its lease lapses instead.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta  KEYS[2] assistants (ZSET assistant -> lease-until ms)
-- ARGV[1] assistant  ARGV[2] steps completed during this stay  ARGV[3] why it left
-- Returns: {1, now}   left (its record closed)
--          {0, now}   no record of this assistant: nothing changed
--          {-1, now}  execution missing (its hot state is gone)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, now} end
local assistant = ARGV[1]
redis.call('ZREM', KEYS[2], assistant)
local records = cjson.decode(redis.call('HGET', KEYS[1], 'assistance') or '{}')
local record = records[assistant]
if not record then return {0, now} end
record['left_at_ms'] = now
record['left_reason'] = ARGV[3]
record['steps_completed'] = record['steps_completed'] + tonumber(ARGV[2])
records[assistant] = record
redis.call('HSET', KEYS[1], 'assistance', cjson.encode(records))
return {1, now}
