-- step_output: the live partial output of a streaming step (a model call streamed token by token),
-- kept bounded while the call runs. Only the holder of the step's current claim token may write.
-- Per step, the output hash keeps `<step>` (the text, its last ARGV[5] bytes), `<step>:token`
-- (the claim that writes it) and `<step>:length` (characters written in all).
-- Key layout: every key lives under the execution's hash tag {<execution id>}.
-- KEYS[1] token   HASH step -> current claim token
-- KEYS[2] output  HASH (fields above)
-- ARGV[1] step  ARGV[2] claim token  ARGV[3] mode: begin | append | finish
-- ARGV[4] text (append)  ARGV[5] max bytes kept  ARGV[6] characters in ARGV[4]
-- Returns: {1, length, discarded}  applied; length = characters written so far; discarded = the
--                                  characters an earlier claim left unfinished (begin only)
--          {0}                     the step's claim is not this token's: nothing changed
--          {-1}                    append without a begin by this claim: nothing changed
local step, token, mode = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HGET', KEYS[1], step) ~= token then return {0} end
local text_field, token_field, length_field = step, step .. ':token', step .. ':length'
local owner = redis.call('HGET', KEYS[2], token_field)
if mode == 'begin' then
  local discarded = 0
  if owner and owner ~= token then
    discarded = tonumber(redis.call('HGET', KEYS[2], length_field) or '0')
  end
  redis.call('HSET', KEYS[2], text_field, '', token_field, token, length_field, 0)
  return {1, 0, discarded}
end
if mode == 'finish' then
  if owner == token then redis.call('HDEL', KEYS[2], text_field, token_field, length_field) end
  return {1, 0, 0}
end
if owner ~= token then return {-1} end
local text = (redis.call('HGET', KEYS[2], text_field) or '') .. ARGV[4]
local max = tonumber(ARGV[5])
if #text > max then
  local start = #text - max + 1
  -- never start inside a UTF-8 sequence: skip its continuation bytes
  while start <= #text do
    local byte = string.byte(text, start)
    if byte < 128 or byte >= 192 then break end
    start = start + 1
  end
  text = string.sub(text, start)
end
redis.call('HSET', KEYS[2], text_field, text)
local length = redis.call('HINCRBY', KEYS[2], length_field, tonumber(ARGV[6]))
return {1, length, 0}
