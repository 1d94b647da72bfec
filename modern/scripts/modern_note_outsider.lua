-- A waiting client outside a fair queue notes itself, so that the queue's
-- releases open windows for it (see the fair release script). Only beside a
-- queue: the fair state hash has a TTL then, which the note keeps.
-- KEYS[1] the fair state hash. Returns 1 noted, 0 no queue.
if redis.call('PTTL', KEYS[1]) <= 0 then return 0 end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], '~seen', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
