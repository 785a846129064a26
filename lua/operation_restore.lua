-- operation_restore: after Redis lost its dataset and an execution was restored from its durable
-- copy, put back an operation its durable ledger says was started for a step that did not
-- complete: recorded as started under no claim, so the step's next claim finds it uncertain and
-- its policy settles it (never a silent second call). An operation already recorded is left as
-- it is. Record layout: see operation_begin.
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] meta (HASH, the execution must exist)  KEYS[2] operations (HASH step -> JSON {name: record})
-- ARGV[1] step  ARGV[2] operation name  ARGV[3] operation id  ARGV[4] attempts  ARGV[5] started at ms
-- Returns: 1 restored, 0 already recorded, -1 no such execution
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
local ops = {}
if raw then ops = cjson.decode(raw) end
if ops[ARGV[2]] then return 0 end
ops[ARGV[2]] = {id = ARGV[3], state = 'started', token = '', attempts = tonumber(ARGV[4]),
                started_at_ms = tonumber(ARGV[5]), uncertain_count = 0}
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(ops))
return 1
