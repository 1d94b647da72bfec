-- The cross-format acquire of compat and modern clients, one round trip per
-- attempt. KEYS[1] lock; ARGV[1] our value, ARGV[2] PX ms, ARGV[3] the value
-- the caller judged an expired legacy lock on its previous attempt ("" none).
-- A free key is written with SET NX PX. A key without TTL that still holds
-- exactly ARGV[3] is replaced: the caller classified it (codec, clock) and
-- nothing has changed it since. Anything else is returned for the caller to
-- classify, never touched: {1} acquired, {2} taken over, or
-- {0, type, first 4097 bytes of the value or false, PTTL, length}.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1}
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then
  return {0, t, false, redis.call('PTTL', KEYS[1]), 0}
end
local cur = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[3] ~= '' and pttl == -1 and cur == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {2}
end
return {0, t, string.sub(cur, 1, 4097), pttl, #cur}
