-- Replaces our value with a later expiry only if the key still holds our value
-- (KEYS[1]; ARGV[1] ours, ARGV[2] new value). Legacy values carry no TTL, so a
-- plain SET is exact. Returns 1 extended, 0 key absent, -1 another value.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return cur and -1 or 0 -- another value, or none
