-- publish_run_event: a run event that must leave now (the end of a run, a wait for input),
-- in one call: appended to the durable event stream when it is durable and the stream
-- exists (the webhook service creates it: without webhooks nothing accumulates), then
-- published on the live channel at the end of the batch of events buffered before it (so
-- subscribers see them in order). PUBLISH reaches every node's subscribers on a Cluster.
-- KEYS[1] stream   STREAM {run-events}:stream, one field per entry (ARGV[3])
-- ARGV[1] the live channel (pub/sub: not a key)
-- ARGV[2] the JSON list of events to publish (the buffered ones, then this one)
-- ARGV[3] the stream entry's field name   ARGV[4] this event's JSON ("": not durable)
-- ARGV[5] the stream's approximate maximum length
-- Returns: {appended (1 or 0), subscribers that received the publication}
local appended = 0
if ARGV[4] ~= '' then
  if redis.call('XADD', KEYS[1], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[5], '*', ARGV[3], ARGV[4]) then
    appended = 1
  end
end
return {appended, redis.call('PUBLISH', ARGV[1], ARGV[2])}
