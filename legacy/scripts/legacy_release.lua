-- Deletes the lock only if it still holds our value (KEYS[1]; ARGV[1] ours).
-- Returns 1 deleted, 0 key absent, -1 another value (left alone).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return cur and -1 or 0 -- another value, or none
