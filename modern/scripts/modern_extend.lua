-- Extends the lock's TTL only if it holds our token. KEYS[1] lock; ARGV[1]
-- token, ARGV[2] ms, ARGV[3] "replace" (TTL becomes ms) or "add" (TTL grows by
-- ms). Returns the new TTL in ms, or 0 if the key does not hold our token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ms = tonumber(ARGV[2])
if ARGV[3] == 'add' then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then ms = ms + left end
end
redis.call('PEXPIRE', KEYS[1], ms)
return ms
