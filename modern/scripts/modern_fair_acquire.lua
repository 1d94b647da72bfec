-- Fair acquire: takes a free lock only when no live waiter is queued before
-- us, else (mode "wait") joins or refreshes our place in the queue. Time is
-- the server's (TIME; scripts replicate their effects, Redis >= 5), so leases
-- of clients with skewed clocks compare fairly.
-- Clients outside the queue are noted (~seen, server ms) so the release
-- yields to them (see the release script): a refused try, or a lock held by
-- a token other than the last fair grant's (~holder, noted beside a queue),
-- a non-fair or legacy client's.
-- KEYS[1] lock, KEYS[2] queue (zset token -> ticket: the server's clock in
-- microseconds when it joined, so that ZADD NX alone keeps a place; the
-- ticket names that place, and a release's grant carries it), KEYS[3]
-- state (hash:
-- token -> "lease_expiry_ms ttl_ms[ inbox]", "~streak", "~open", "~last",
-- "~seen", "~holder", "~hexp": when the key noted there lapses unless its
-- holder extends it, "~until": the queue and the state lapse no earlier),
-- KEYS[4] fencing counter (optional).
-- ARGV[1] "mode token ttl_ms lease_ms[ inbox]", mode one of try, wait, leave;
-- inbox: the waiter's own channel, where a release hands it the lock.
-- Returns {1, fence, ms} when ours, ms what the key's TTL has left (a
-- hand-off's PX started at the release, before this attempt); {0, ms worth
-- waiting, place, foreign} when not, place our ticket when this attempt
-- queued us anew, 0 when we kept our place (or do not queue): the client
-- remembers it; foreign 1 when the holder may not be a fair client, 2 when
-- its value is no lockbridge token (32 hex digits): a client outside the
-- queue for certain, noted as one seen.
-- The TTL and lease are refused before the first write unless Redis takes
-- them as they are (no 0, no leading zero) and Lua keeps them exact (up to
-- 10^13 ms; lockbridge sends 1 to 10^12): SET PX fails on either, and a TTL
-- queued here is one every release would try to SET.
local mode, token, ttl, lease, inbox =
  string.match(ARGV[1], '^(%l+) (%x+) ([1-9]%d*) ([1-9]%d*) ?(.*)$')
if not mode then return redis.error_reply('ERR fair acquire: bad arguments') end
lease = tonumber(lease)
if tonumber(ttl) > 1e13 or lease > 1e13 then
  return redis.error_reply('ERR fair acquire: TTL or lease out of range')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Below 2^53, exact as a Lua number; '%.0f' writes every digit.
local ticket = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))

-- Past 2^53 a Lua number is no longer every integer: two holders could be
-- handed the same fencing number. Such a counter (set by hand: counting
-- gets nowhere near it) is refused as one that cannot count.
local FENCE_PAST = 'ERR fencing counter at 2^53 or past: its numbers would not be exact'

-- A time the state notes (server ms): a decimal integer no further off than
-- the 2 x 10^13 ms a lease allows, else nil. The state is another program's
-- to spoil: a float, "inf" or a date centuries off must not reach PEXPIRE
-- (which would fail after the first writes) or come back as a hint.
local function noted(v)
  local n = tonumber(string.match(v or '', '^%d+$') or '')
  if n and n <= now + 2e13 then return n end
  return nil
end

-- Best effort: a queue or state of another type (no lockbridge client
-- writes one) must not fail an attempt that already took, or was handed,
-- the lock (the key would hold our token while we are told otherwise).
-- The queue may be left empty, which deletes it and its TTL: ~until goes
-- with the entry, so that the wait that forms it again gives it one.
local function drop(w)
  redis.pcall('ZREM', KEYS[2], w)
  redis.pcall('HDEL', KEYS[3], w, '~until')
end

-- The oldest waiter whose lease has not lapsed, and its lease left (ms);
-- lapsed waiters met on the way are dropped. An entry may name an inbox
-- after its lease and TTL: only the lease is read here.
local function head()
  while true do
    local h = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    if not h then return nil, 0 end
    local exp = tonumber(string.match(redis.call('HGET', KEYS[3], h) or '', '^(%d+) %d+'))
    if exp and exp > now then return h, exp - now end
    drop(h)
  end
end

-- An outsider seen now; the note lapses with the queue's state.
local function seen()
  redis.call('HSET', KEYS[3], '~seen', now)
  if redis.call('PTTL', KEYS[3]) < 2 * lease then redis.call('PEXPIRE', KEYS[3], 2 * lease) end
end

-- A key of another type at the lock's name fails an attempt, but not a
-- leave: a wait that ended on that error still gives up its place.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if mode ~= 'leave' then return v end
  v = false
end
if v == token then
  -- A release handed the lock to us; it also counted our fencing number.
  drop(token)
  local fence = 0
  if KEYS[4] then fence = tonumber(redis.call('GET', KEYS[4]) or '0') or 0 end
  return {1, fence, redis.call('PTTL', KEYS[1])}
end
if mode == 'leave' then
  drop(token)
  return {0, -2, 0}
end

local hint, foreign, ttls_end = nil, 0, nil
if not v then
  local h, left = head()
  local f = redis.call('HMGET', KEYS[3], '~open', '~until')
  local open = tonumber(f[1] or '0') or 0
  ttls_end = noted(f[2])
  local ours
  if open > now then
    -- A release left the lock to clients outside the queue for a while.
    ours = mode == 'try'
    hint = open - now
  else
    ours = (not h) or h == token
    hint = left
  end
  if ours then
    -- Counted first: a counter that cannot count (no integer, at its limit,
    -- refused by the ACL) fails the attempt before anything is written.
    local fence = 0
    if KEYS[4] then
      fence = redis.pcall('INCR', KEYS[4])
      if type(fence) == 'table' then return fence end
      if fence >= 2^53 then return redis.error_reply(FENCE_PAST) end
    end
    redis.call('SET', KEYS[1], token, 'PX', ttl)
    drop(token)
    redis.call('HDEL', KEYS[3], '~streak', '~open')
    -- Only beside a queue (whose state has a TTL) is the holder worth noting.
    if redis.call('PTTL', KEYS[3]) > 0 then
      redis.call('HSET', KEYS[3], '~holder', token, '~hexp', now + tonumber(ttl))
    end
    return {1, fence, tonumber(ttl)}
  end
else
  local f = redis.call('HMGET', KEYS[3], '~holder', '~hexp', '~until')
  local known, hexp = f[1], noted(f[2])
  ttls_end = noted(f[3])
  -- The holder's expiry as its grant noted it, while that is to come: a
  -- holder that extended since holds longer, and the wait that attempts at
  -- the noted time learns it then, from the key. No fair TTL is over 10^12
  -- ms (the client refuses a longer hint).
  if v == known and hexp and hexp > now and hexp - now <= 1e12 then
    hint = hexp - now
  else
    hint = redis.call('PTTL', KEYS[1])
  end
  local outside = #v ~= 32 or not string.match(v, '^%x+$')
  -- Unknown (no grant noted since the queue formed) is not foreign.
  if mode == 'wait' and ((known and v ~= known) or outside) then seen() end
  -- Not the last fair grant's token (or none noted yet): its release may
  -- hand nothing off, so a waiter blocked on its grant list polls.
  if v ~= known then foreign = 1 end
  if outside then foreign = 2 end
end
if mode == 'try' then seen() end

local place = 0
if mode == 'wait' then
  if redis.call('ZADD', KEYS[2], 'NX', ticket, token) == 1 then place = tonumber(ticket) end
  local entry = (now + lease) .. ' ' .. ttl
  if inbox ~= '' then entry = entry .. ' ' .. inbox end
  -- The queue vanishes on its own once every waiter has gone: the queue
  -- and the state are kept for twice a lease, and again only once less than
  -- a lease of that is left (noted in ~until), not at every wait. A queue
  -- the ZADD formed anew has no TTL whatever ~until says (an attempt that
  -- empties it drops ~until, but a hand-off that empties it keeps it, and
  -- another program may delete it): PEXPIRE NX gives it one (Redis >= 7;
  -- before, the TTL is read), as
  -- long as ~until says, which covers every live waiter's lease (each renews
  -- it once less than its own lease is left): twice this waiter's lease may
  -- end before a longer lease of another's.
  if ttls_end and ttls_end >= now + lease then
    redis.call('HSET', KEYS[3], token, entry)
    local left = ttls_end - now
    local set = redis.pcall('PEXPIRE', KEYS[2], left, 'NX')
    if type(set) == 'table' and redis.call('PTTL', KEYS[2]) == -1 then
      redis.call('PEXPIRE', KEYS[2], left)
    end
  else
    redis.call('HSET', KEYS[3], token, entry, '~until', now + 2 * lease)
    for i = 2, 3 do
      if redis.call('PTTL', KEYS[i]) < 2 * lease then redis.call('PEXPIRE', KEYS[i], 2 * lease) end
    end
  end
end
return {0, hint, place, foreign}
