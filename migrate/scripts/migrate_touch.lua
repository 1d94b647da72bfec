-- One round trip for a client's periodic duties: read the namespace's mode
-- and refresh the client's census entry (when ARGV[1] is not "") with the mode
-- the client will use from now on. KEYS[1] control key, KEYS[2] census hash;
-- ARGV[1] client id, ARGV[2] JSON entry, ARGV[3] "ABSENT:CURRENT": the mode a
-- follower takes when the key is absent, and the one it keeps when the key
-- holds something else. A follower's entry carries "mode":"?" in place of its
-- mode (client strings are escaped, so only the mode field can match); other
-- entries are written as given.
-- Returns {1, mode value}, {0} when the control key is absent, {-1} when it
-- is not a string.
local t = redis.call('TYPE', KEYS[1])['ok']
local absent, current = string.match(ARGV[3], '^(%a+):(%a+)$')
local reply, mode
if t == 'none' then
  reply, mode = {0}, absent
elseif t ~= 'string' then
  reply, mode = {-1}, current
else
  local v = redis.call('GET', KEYS[1])
  reply, mode = {1, v}, current
  if v == 'legacy' or v == 'compat' or v == 'modern' then
    mode = v
  end
end
if ARGV[1] ~= '' then
  local entry = ARGV[2]
  local i = string.find(entry, '"mode":"?"', 1, true)
  if i and mode then
    entry = string.sub(entry, 1, i - 1) .. '"mode":"' .. mode .. '"' .. string.sub(entry, i + 10)
  end
  redis.call('HSET', KEYS[2], ARGV[1], entry)
end
return reply
