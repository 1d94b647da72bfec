-- Fair release: if the lock holds our token, hands it to the oldest waiter
-- whose lease has not lapsed (writes that waiter's token with its own TTL and
-- publishes the grant "token ticket[ fence]" on the waiter's inbox, or on the
-- release channel for a waiter that named none: the ticket names the queue
-- place granted, so that a grant read late, after the token queued again,
-- grants nothing), or deletes it and publishes "released". After `every` hand-offs in a row (0: never) the lock may be
-- left free instead, queued waiters keeping off it for `ms`, so that clients
-- outside the queue get a turn. Such windows are `gap` x `ms` apart: gap is
-- 4 after a window since which an outsider was seen (a try of a fair client
-- refused, or a fair attempt finding the lock held by a token no fair grant
-- wrote: see the acquire script), and doubles up to 64 after each window
-- since which none was; an outsider seen since the last window brings the
-- next one forward to 4 x `ms`. So a queue alone idles at most 1/65 of the
-- time for clients that may not exist, and one beside outsiders at most 1/5.
-- KEYS as the fair acquire script; ARGV[1] "token every ms channel".
-- Returns 2 handed off, 1 released, 0 not ours (nothing changed).
local token, every, yield_ms, channel = string.match(ARGV[1], '^(%x+) (%d+) (%d+) (.*)$')
if not token then return redis.error_reply('ERR fair release: bad arguments') end
if redis.call('GET', KEYS[1]) ~= token then return 0 end
every, yield_ms = tonumber(every), tonumber(yield_ms)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- The oldest live waiter, taken off the queue, with its ticket, the TTL it
-- asked for and its inbox ('': none); lapsed waiters met on the way are
-- dropped.
local function head()
  while true do
    local p = redis.call('ZPOPMIN', KEYS[2])
    local h = p[1]
    if not h then return nil end
    local exp, ttl, inbox = string.match(redis.call('HGET', KEYS[3], h) or '', '^(%d+) (%d+) ?(.*)$')
    if exp and tonumber(exp) > now and tonumber(ttl) > 0 then return h, p[2], ttl, inbox end
    redis.call('HDEL', KEYS[3], h)
  end
end

local h, ticket, ttl, inbox = head()
if h then
  local function field(f) return redis.call('HGET', KEYS[3], f) end
  local streak = 0
  if every > 0 then streak = tonumber(field('~streak') or '0') or 0 end
  local last, gap, seen, due = 0, 4, false, false
  if every > 0 and streak >= every then
    last = tonumber(field('~last') or '0') or 0
    gap = tonumber(field('~gap') or '4') or 4
    local seenat = tonumber(field('~seen') or '')
    seen = seenat ~= nil and seenat > last - yield_ms
    due = now >= last + gap * yield_ms or (seen and now >= last + 4 * yield_ms)
  end
  if not due then
    local msg = h .. ' ' .. string.format('%.0f', tonumber(ticket))
    if KEYS[4] then msg = msg .. ' ' .. redis.call('INCR', KEYS[4]) end
    -- Published before the key is written: a PUBLISH the ACL refuses ends
    -- the script with the lock still ours (the waiter popped off the queue
    -- rejoins at its next attempt). A user whose ACL refuses the inbox
    -- still hands off: the waiter learns it at its next attempt.
    if inbox == '' then
      redis.call('PUBLISH', channel, msg)
    else
      redis.pcall('PUBLISH', inbox, msg)
    end
    redis.call('SET', KEYS[1], h, 'PX', ttl)
    redis.call('HDEL', KEYS[3], h)
    redis.call('HSET', KEYS[3], '~streak', streak + 1, '~holder', h)
    return 2
  end
  -- The head keeps its place through the window.
  redis.call('ZADD', KEYS[2], ticket, h)
  if seen then gap = 4 else gap = math.min(gap * 2, 64) end
  redis.call('HSET', KEYS[3], '~streak', 0, '~open', now + yield_ms, '~last', now + yield_ms,
             '~gap', gap)
  if redis.call('PTTL', KEYS[3]) < yield_ms then redis.call('PEXPIRE', KEYS[3], yield_ms) end
  -- Popping the last waiter deleted the queue and its TTL: it lapses with
  -- the state again.
  redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[3]))
else
  redis.call('HDEL', KEYS[3], '~streak')
end
redis.call('PUBLISH', channel, 'released') -- first, as above
redis.call('DEL', KEYS[1])
return 1
