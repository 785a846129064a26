-- server_time: the Redis server's clock, read inside a pipeline on the node that owns a slot.
-- A Redis Cluster pipeline refuses the keyless TIME command; EVAL with one key routes to
-- that key's node, so a read of some keys and their server's time still take one round trip.
-- KEYS[1] any key of the slot to read the time of (not touched)
-- Returns: {seconds, microseconds} like TIME
return redis.call('TIME')
