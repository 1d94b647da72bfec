-- Pushes the grant (or a window's wake-up) that the fair release script
-- returned for its caller to push, and gives the list its TTL in the same
-- step, so that a releaser that stops in between leaves no list that never
-- lapses. A grant is pushed only while the key still holds the grantee's
-- token, and its list lapses with that key (the key's TTL is the grantee's
-- own, as the release wrote it): a grant never outlives its lock. A wake-up
-- (place 0: the key was freed for outsiders) lapses after ARGV[2] ms.
-- KEYS[1] lock, KEYS[2] the grantee's grant list; ARGV[1] the grant
-- "token place ...", ARGV[2] ms. Returns the list's length, 0 when nothing
-- was pushed (the grant's lock lapsed or moved on).
-- Arguments are checked before the first write: Redis keeps what a failing
-- script wrote, and a list pushed without its TTL would never lapse.
local grantee, place = string.match(ARGV[1], '^(%x+) (%d+)')
if not grantee then return redis.error_reply('ERR fair push: bad grant') end
-- A TTL past 2^53 ms would reach PEXPIRE as a float and fail after the push.
local ms = tonumber(string.match(ARGV[2], '^%d+$') or '')
if not ms or ms < 1 or ms > 2^53 then return redis.error_reply('ERR fair push: bad TTL') end
if place ~= '0' then
  if redis.call('GET', KEYS[1]) ~= grantee then return 0 end
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then ms = left end
end
local n = redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ms)
return n
