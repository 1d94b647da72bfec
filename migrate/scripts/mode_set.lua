-- Sets a namespace's mode and announces it. KEYS[1] control key, KEYS[2] the
-- namespace's gate record (a hash: since_ms gets the server's time, so the
-- gate knows how long the stage has lasted); ARGV[1] new mode name, ARGV[2]
-- expected current mode ("" any; an absent key is "legacy"), ARGV[3] channel.
-- A compare-and-set on the whole stage when ARGV[4] is given: the stage's
-- start (since_ms) must still be ARGV[4] ("-" for none recorded), and with
-- ARGV[5] "absent" the control key must still be absent.
-- Returns the PUBLISH receiver count, -1 when the current stage is not the
-- expected one, -2 when the control key is not a string or the record not a
-- hash.
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' and t ~= 'none' then
  return -2
end
local g = redis.call('TYPE', KEYS[2])['ok']
if g ~= 'hash' and g ~= 'none' then
  return -2
end
if ARGV[2] ~= '' then
  local cur = redis.call('GET', KEYS[1]) or 'legacy'
  if cur ~= ARGV[2] then
    return -1
  end
end
if ARGV[5] == 'absent' and t ~= 'none' then
  return -1
end
if ARGV[4] and ARGV[4] ~= '' then
  local since = redis.call('HGET', KEYS[2], 'since_ms') or '-'
  if since ~= ARGV[4] then
    return -1
  end
end
-- Announced first: a PUBLISH the ACL refuses ends the script before the
-- mode is written, so an error reply means the mode did not change.
local n = redis.call('PUBLISH', ARGV[3], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1])
local now = redis.call('TIME')
redis.call('HSET', KEYS[2], 'since_ms', now[1] * 1000 + math.floor(now[2] / 1000))
return n
