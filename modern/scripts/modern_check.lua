-- Tells whether the lock holds our token and for how long. KEYS[1] lock;
-- ARGV[1] token. Returns the PTTL (ms, -1 if no TTL) if ours, -3 if not.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -3
