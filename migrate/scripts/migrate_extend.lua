-- Rewrites value and TTL together, only if the key holds exactly the value
-- this client wrote. KEYS[1] lock; ARGV[1] our value, ARGV[2] new value (a
-- later timestamp, or the same token), ARGV[3] PX ms.
-- Returns 1 extended, 0 key absent, -1 another value (left alone).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return cur and -1 or 0 -- another value, or none
