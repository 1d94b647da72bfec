-- Takes over an expired legacy lock only if the key still holds the value the
-- caller saw (KEYS[1]; ARGV[1] observed value, ARGV[2] new value). A key that
-- vanished since was released: writing it is what SETNX would have done.
-- Returns 1 taken over, 2 written into a free key, 0 changed since observed.
local cur = redis.call('GET', KEYS[1])
if cur == false then
  redis.call('SET', KEYS[1], ARGV[2])
  return 2
end
if cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
