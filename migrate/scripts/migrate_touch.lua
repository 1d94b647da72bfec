-- One round trip for a client's periodic duties: refresh its census entry
-- (when ARGV[1] is not "") and read the namespace's mode. KEYS[1] control key,
-- KEYS[2] census hash; ARGV[1] client id, ARGV[2] JSON entry.
-- Returns {1, mode value}, {0} when the control key is absent, {-1} when it
-- is not a string.
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  return {0}
end
if t ~= 'string' then
  return {-1}
end
return {1, redis.call('GET', KEYS[1])}
