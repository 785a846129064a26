-- publish_run_event: run events that must leave now (the end of a run, a wait for input),
-- in one call: each durable one appended to the durable event stream when the stream
-- exists (the webhook service creates it: without webhooks nothing accumulates), then all
-- published on the live channel at the end of the batch of events buffered before them (so
-- subscribers see them in order). PUBLISH reaches every node's subscribers on a Cluster.
-- KEYS[1] stream   STREAM {run-events}:stream, one field per entry (ARGV[3])
-- ARGV[1] the live channel (pub/sub: not a key)
-- ARGV[2] the JSON list of events to publish (the buffered ones, then these)
-- ARGV[3] the stream entry's field name   ARGV[4] the stream's approximate maximum length
-- ARGV[5..] the JSON of each durable event to append, in order (none: nothing appended)
-- Returns: {entries appended, subscribers that received the publication}
local appended = 0
for i = 5, #ARGV do
  if not redis.call('XADD', KEYS[1], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[4], '*', ARGV[3], ARGV[i]) then
    break  -- no stream: none of them is appended
  end
  appended = appended + 1
end
return {appended, redis.call('PUBLISH', ARGV[1], ARGV[2])}
