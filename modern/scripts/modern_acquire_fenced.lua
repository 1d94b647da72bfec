-- Acquires with a fencing number: SET NX PX and, only on success, INCR the
-- companion counter in the same script, so every holder gets a larger number
-- than any holder before it. KEYS[1] lock, KEYS[2] counter; ARGV[1] token,
-- ARGV[2] ttl ms. Returns {1, fence} when acquired, {0, holder's PTTL} if not;
-- the counter's error (nothing written) when it cannot count; a WRONGTYPE error when the key holds no string (a list, a hash: no lock of
-- ours, and nothing to wait for).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- A counter that cannot count (no integer, at its limit, refused by the
  -- ACL) fails the acquire with the key given back, unseen: a lock taken by
  -- a call that reports failure would be held by no one for a whole TTL.
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' then
    redis.call('DEL', KEYS[1])
    return fence
  end
  -- Past 2^53 a Lua number is no longer every integer: two holders could be
  -- handed the same number. Such a counter (set by hand) cannot count either.
  if fence >= 2^53 then
    redis.call('DEL', KEYS[1])
    return redis.error_reply('ERR fencing counter at 2^53 or past: its numbers would not be exact')
  end
  return {1, fence}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 and redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then
  return redis.error_reply('WRONGTYPE the lock key holds a value that is not a string')
end
return {0, pttl}
