-- A client outside the fair queue and the baton notes itself, so that fair
-- releases open windows for it (see the fair release script): a wait outside
-- fair mode refused for a while, a fair try refused, or a fair wait that
-- found the key held by a value that is no lockbridge token. Beside a queue
-- (the fair state hash has a TTL then, which the note keeps) it sets ~seen
-- there. Beside a queue or a baton waiter's mark, or when the caller saw the
-- outside holder itself, it writes the outsider note, which baton releases
-- read with the key: the server's ms (and ' lb', below), lapsing after
-- ARGV[1] ms, written only over nothing or an earlier note (a value of
-- another kind stays as it was).
-- KEYS[1] the fair state hash, KEYS[2] the outsider note, KEYS[3] the baton
-- mark. ARGV[1] the note's TTL, ms; ARGV[2] '1' when the caller saw a holder
-- outside itself, else '0'. Returns 1 fair clients are there (a queue or a
-- baton waiter), 0 none.
local ttl = tonumber(ARGV[1])
if not ttl or ttl < 1 or ttl > 1e12 or ttl ~= math.floor(ttl) then
  return redis.error_reply('ERR outsider note: bad TTL')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fair = redis.call('PTTL', KEYS[1]) > 0
if fair then redis.call('HSET', KEYS[1], '~seen', now) end
if not fair then
  -- A mark is a waiter's token (32 hex digits); anything else names none.
  local m = redis.pcall('GET', KEYS[3])
  fair = type(m) == 'string' and #m == 32 and string.match(m, '^%x+$') ~= nil
end
-- A note says who was seen: the server's ms alone for a holder that is no
-- lockbridge token (the caller saw one), which fair releasers stand back
-- for; followed by ' lb' for a lockbridge client outside fair mode, which
-- gets windows but needs no stand-back (it hands the key back at its
-- release, modern/fair.c). An ' lb' note never replaces a live bare one.
if fair or ARGV[2] == '1' then
  local v = redis.pcall('GET', KEYS[2])
  local bare = type(v) == 'string' and string.match(v, '^%d+$') ~= nil
  local ours = type(v) == 'string' and string.match(v, '^%d+ lb$') ~= nil
  if ARGV[2] == '1' and (v == false or bare or ours) then
    redis.call('SET', KEYS[2], now, 'PX', ttl)
  elseif v == false or ours then
    redis.call('SET', KEYS[2], now .. ' lb', 'PX', ttl)
  end
end
return fair and 1 or 0
