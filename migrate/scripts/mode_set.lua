-- Sets a namespace's mode and announces it. KEYS[1] control key; ARGV[1] new
-- mode name, ARGV[2] expected current mode ("" any; an absent key is
-- "legacy"), ARGV[3] channel. Returns the PUBLISH receiver count, -1 when the
-- current mode is not the expected one, -2 when the key is not a string.
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' and t ~= 'none' then
  return -2
end
if ARGV[2] ~= '' then
  local cur = redis.call('GET', KEYS[1]) or 'legacy'
  if cur ~= ARGV[2] then
    return -1
  end
end
-- Announced first: a PUBLISH the ACL refuses ends the script before the
-- mode is written, so an error reply means the mode did not change.
local n = redis.call('PUBLISH', ARGV[3], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1])
return n
