-- release_reservation: give back a run slot held by reserve_capacity (dispatch failed, or
-- the instance has published capacity that already counts the dispatched run).
-- Key layout: the key lives under the instance's hash tag {<runtime instance id>}.
-- KEYS[1] reservations  ZSET  holder -> expires-at ms
-- ARGV[1] holder (shared run id)
-- Returns: {1, now}  released
--          {0, now}  not held (already released or expired)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('ZREM', KEYS[1], ARGV[1]), now}
