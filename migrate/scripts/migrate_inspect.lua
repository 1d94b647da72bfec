-- Reads what a lock key holds without changing it. KEYS[1] key.
-- Returns {type, first 4097 bytes of the value or false, PTTL, length}.
local t = redis.call('TYPE', KEYS[1])['ok']
local pttl = redis.call('PTTL', KEYS[1])
if t ~= 'string' then
  return {t, false, pttl, 0}
end
local cur = redis.call('GET', KEYS[1])
return {t, string.sub(cur, 1, 4097), pttl, #cur}
