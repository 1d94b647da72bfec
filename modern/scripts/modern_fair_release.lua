-- Fair release: if the lock holds our token, hands it to the oldest waiter
-- whose lease has not lapsed (writes that waiter's token with its own TTL and
-- publishes the grant "token ticket[ fence]" on the waiter's inbox, or on the
-- release channel for a waiter that named none: the ticket names the queue
-- place granted, so that a grant read late, after the token queued again,
-- grants nothing), or deletes it and publishes "released".
-- Windows for clients outside the queue open only for an outsider seen since
-- the last window opened (~seen: a refused try of a fair client, a fair
-- attempt that found the lock held by a token no fair grant wrote or by a
-- value that is no token, or a waiting client outside the queue that noted
-- itself): then, after `every` hand-offs in a row (0: never), the lock is
-- left free and queued waiters keep off it for `ms`, windows at least 4 x
-- `ms` apart, so outsiders get at most a fifth of the time. A queue alone
-- never idles. (Beside the baton, windows follow the outsider note and the
-- probes' schedule instead: see below.)
-- A waiter blocked on its grant list (entry inbox '*', the list
-- "{key}:grant:<token>") is handed the grant "token ticket fence next" by
-- LPUSH, next the token queued behind it ('-': none), so that it can name
-- that waiter's list when it releases in turn: every key stays declared.
-- When the head is not the successor the caller named, the script hands the
-- lock over all the same and returns the grant for the caller to push.
-- A waiter may also block on the lock's one baton list (KEYS[5]), leaving
-- its token as a mark (KEYS[6], with a TTL no longer than its block): with
-- the queue empty and a mark alive that is not the caller's own (a caller
-- that took a baton names the mark it left, so that the last waiter does
-- not hand the lock to itself, gone; that mark is deleted in every branch,
-- even when the key is no longer ours; a value that is no token is no mark),
-- the release writes a fresh token at
-- the key with the caller's TTL and pushes the baton "token ttl life" with a
-- TTL of life ms; Redis hands it to the waiter that blocked first. Nobody
-- holds the fresh token until the baton is popped, so no other release can
-- come before it lapses (life is at most a quarter of the TTL).
-- Baton passes open windows too, for an outsider noted at KEYS[7] (the
-- outsider note, read with the key and the mark: nothing more to read while
-- none is noted): with a mark alive, the queue empty and a note written
-- since the last window opened (~last), at least 4 x `ms` after it (0
-- `every`: never), the key is freed instead, ~open keeps queued waiters off
-- for `ms`, and the script answers 3, so that the caller keeps off too.
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] state, KEYS[4] the grant list of
-- `succ` (any list of the lock's when succ is '-'), then the baton list, the
-- mark and the outsider note (optional: 6 or 7 keys, the note optional),
-- then the fencing counter (optional: 5 keys, or 8 with the baton's).
-- ARGV[1] "token every ms succ channel", or with the baton's keys "token
-- every ms succ fresh marked ttl life channel", marked '-' when the caller
-- left no mark, and fresh prefixed with 'p' for a probe: the caller asks
-- for a window where it would pass the baton, if one is due on the probes'
-- schedule (below), so that a client that does not queue, refused while
-- the baton passes and seen by nobody, can take the key and be seen; and
-- before that with 'o' by a client outside fair mode that found fair
-- clients waiting (modern/fair.c, lb__fair_courteous), which passes no
-- baton while a window is open.
-- Returns 3 released into a window beside the baton, 2 handed off, 1
-- released, 4 and 5 as 2 (a baton passed, not a queue's hand-off) and 1
-- with an outsider noted that is no lockbridge client (so that the caller
-- stands back too, see modern/outsider.c), 6 released by an 'o' caller into a window already
-- open, with a waiter marked on the baton, 0 not ours (nothing changed but
-- the caller's own mark, deleted), or the
-- grant, a string, for the caller to LPUSH to "{key}:grant:<its token>"
-- (released: a hand-off, or a window's wake-up "token 0 0 -").
local args, baton = ARGV[1], nil
if #KEYS >= 6 then
  local head, probe, fresh, marked, bttl, life, rest = string.match(args,
    '^(%x+ %d+ %d+ [%x-]+) ([op]*)(%x+) ([%x-]+) ([1-9]%d*) ([1-9]%d*) (.*)$')
  if not head or tonumber(bttl) > 1e12 or tonumber(life) * 4 > tonumber(bttl) then
    return redis.error_reply('ERR fair release: bad baton')
  end
  args, baton = head .. ' ' .. rest,
                {fresh = fresh, marked = marked, ttl = bttl, life = life,
                 probe = string.find(probe, 'p', 1, true) ~= nil,
                 outside = string.find(probe, 'o', 1, true) ~= nil}
end
local FENCE = KEYS[baton and 8 or 5]
local token, every, yield_ms, succ, channel =
  string.match(args, '^(%x+) (%d+) (%d+) ([%x-]+) (.*)$')
if not token then return redis.error_reply('ERR fair release: bad arguments') end
every, yield_ms = tonumber(every), tonumber(yield_ms)
-- Past 10^13, Lua would hand the window's numbers (a count, and a length in
-- ms) on as floats after the first writes (lockbridge sends at most 10^12).
if every > 1e13 or yield_ms > 1e13 then
  return redis.error_reply('ERR fair release: window out of range')
end
-- A mark is a waiter's token: anything else at its name (another program's
-- value, a key of another type) names no waiter blocked on the baton.
-- The key and the mark are read with one MGET (a turn on the baton is one
-- command cheaper): MGET answers nil for a value that is no string, which
-- is no mark, and the key is read again with GET below only when MGET did
-- not find our token there, so a key of another type still fails as before.
-- A user whose ACL refuses MGET (one set up before the release used it)
-- reads the mark with GET instead.
-- The outsider note rides along (a third key to MGET, no command more).
local mark, held, outsider, freed, foreign = nil, nil, nil, false, false
if baton then
  local both = redis.pcall('MGET', KEYS[1], KEYS[6], KEYS[7] or KEYS[6])
  if both.err then
    mark = redis.pcall('GET', KEYS[6])
    if KEYS[7] then outsider = redis.pcall('GET', KEYS[7]) end
  else
    held, mark, outsider = both[1], both[2], KEYS[7] and both[3]
  end
  -- A bare time: a holder that is no lockbridge token was seen, and callers
  -- stand back for it (4, 5); with ' lb', a lockbridge client outside fair
  -- mode, which hands the key back itself: windows, and no stand-back.
  local v = type(outsider) == 'string' and outsider or ''
  foreign = string.match(v, '^%d+$') ~= nil
  outsider = tonumber(string.match(v, '^(%d+)$') or string.match(v, '^(%d+) lb$') or '')
  if type(mark) ~= 'string' or #mark ~= 32 or not string.match(mark, '^%x+$') then mark = nil end
  -- The caller's own mark is stale whatever happens next (its wait no longer
  -- blocks): left alive, the release of whoever holds the lock next, within
  -- the mark's TTL, would pass the lock to nobody. It goes in every branch.
  if mark and mark == baton.marked then
    redis.call('DEL', KEYS[6])
    mark = nil
  end
end
if held ~= token and redis.call('GET', KEYS[1]) ~= token then return 0 end
-- The server's clock, read only on the queue's path: a baton needs none.
local now = nil
local function clock()
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A command that fails after the first writes (a waiter popped, a fencing
-- number spent) would end the script with the lock still ours and the queue
-- changed: what may fail is tried first (the fencing counter's INCR, with
-- pcall) or checked first (what the ACL refuses, Redis >= 7; an older server
-- fails on the refused command itself), and `undo` puts the popped head back
-- (with the queue's TTL, which popping its last entry lost) before failing.
local function refused(...)
  if not redis.acl_check_cmd then return nil end
  for _, c in ipairs({...}) do
    if c[1] and not redis.acl_check_cmd(c[2], c[3], 'x') then
      return redis.error_reply('NOPERM fair release: this user may not run ' ..
                               string.lower(c[2]) .. ' here; nothing changed')
    end
  end
  return nil
end
local function undo(h, ticket, err)
  if h then
    redis.call('ZADD', KEYS[2], ticket, h)
    local left = redis.call('PTTL', KEYS[3])
    if left > 0 then redis.call('PEXPIRE', KEYS[2], left) end
  end
  return err
end

-- Pushes to the named successor's grant list, which then lapses after ms. A
-- value of another type at that name (no lockbridge client writes one)
-- refuses the push: the release goes on without it, and the waiter learns
-- where it stands from its next attempt, once its BLPOP ends empty or is
-- refused.
local function push_named(msg, ms)
  if type(redis.pcall('LPUSH', KEYS[4], msg)) ~= 'table' then
    redis.call('PEXPIRE', KEYS[4], ms)
  end
end

-- The oldest live waiter, taken off the queue, with its ticket, the TTL it
-- asked for, its inbox ('': none), the hand-offs in a row so far and the
-- window fields; lapsed waiters met on the way are dropped.
-- A queue or state of another type (no lockbridge client writes one) makes
-- any hand-off impossible: no waiter, and the release goes on as a plain
-- one. A head popped before its state proved unreadable stays popped: no
-- fair attempt gets anywhere while that value stays, and putting it back
-- could remake a queue without a TTL.
local popped = false
local function head()
  while true do
    local p = redis.pcall('ZPOPMIN', KEYS[2])
    local h = p[1]
    if not h then return nil end
    popped = true
    if not now then clock() end
    local f = redis.pcall('HMGET', KEYS[3], h, '~streak', '~last', '~seen')
    if f.err then return nil end
    -- A TTL that SET PX could not take (0, a leading zero, past 10^13: no
    -- lockbridge attempt queues one) counts as lapsed.
    local exp, ttl, inbox = string.match(f[1] or '', '^(%d+) ([1-9]%d*) ?(.*)$')
    if exp and tonumber(exp) > now and tonumber(ttl) <= 1e13 then
      return h, p[2], ttl, inbox, tonumber(f[2] or '0') or 0, f[3], f[4]
    end
    redis.call('HDEL', KEYS[3], h)
  end
end

local h, ticket, ttl, inbox, streak, last, seenat = head()
local wake, window = nil, false
if h then
  local due = false
  if every > 0 and streak >= every then
    last, seenat = tonumber(last or '0') or 0, tonumber(seenat or '')
    due = seenat ~= nil and seenat > last - yield_ms and now >= last + 4 * yield_ms
  end
  if not due then
    local no = refused({inbox == '*' and h == succ, 'LPUSH', KEYS[4]},
                       {inbox == '', 'PUBLISH', channel})
    if no then return undo(h, ticket, no) end
    local msg = h .. ' ' .. string.format('%.0f', tonumber(ticket))
    if FENCE then
      local fence = redis.pcall('INCR', FENCE)
      if type(fence) == 'table' then return undo(h, ticket, fence) end
      -- Past 2^53 two holders could be handed the same number (see the
      -- acquire script); below it, '%.0f' writes every digit (concatenation
      -- would write 1e+14).
      if fence >= 2^53 then
        return undo(h, ticket, redis.error_reply(
          'ERR fencing counter at 2^53 or past: its numbers would not be exact'))
      end
      msg = msg .. ' ' .. string.format('%.0f', fence)
    end
    local push, nxt = nil, nil
    -- A user whose ACL refuses the inbox still hands off: the waiter
    -- learns it at its next attempt.
    if inbox == '*' then
      if not FENCE then msg = msg .. ' 0' end
      nxt = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
      msg = msg .. ' ' .. (nxt or '-')
      if h == succ then
        -- A grantee that died leaves its list: it goes with the grant.
        push_named(msg, ttl)
      else
        push = msg
      end
    elseif inbox == '' then
      redis.call('PUBLISH', channel, msg)
    else
      redis.pcall('PUBLISH', inbox, msg)
    end
    redis.call('SET', KEYS[1], h, 'PX', ttl)
    -- Written before the grantee's entry goes: deleting a hash's last field
    -- deletes the hash and its TTL, and a write after it would start a hash
    -- that never lapses. ~until stays, even when the pop emptied the queue
    -- (deleting it and its TTL): the wait that forms it again sends PEXPIRE
    -- NX with what ~until has left, or renews both TTLs once that is under
    -- its lease (see the acquire script). Deleting ~until at every hand-off
    -- made every wait renew both TTLs, four commands more per turn.
    redis.call('HSET', KEYS[3], '~streak', streak + 1, '~holder', h, '~hexp', now + tonumber(ttl))
    redis.call('HDEL', KEYS[3], h)
    -- A hand-off to the queue says nothing of a noted outsider: the queue's
    -- windows serve it, and a releaser standing back after every hand-off
    -- starved the queue (28 waiters made 260 acquisitions a second beside 4
    -- polling clients, against 2424 before).
    return push or 2
  end
  local no = refused({inbox == '*' and h == succ, 'LPUSH', KEYS[4]}, {true, 'PUBLISH', channel})
  if no then return undo(h, ticket, no) end
  -- The head keeps its place through the window; blocked on its grant list,
  -- it is woken (place 0: no grant) to learn the window's end: here when
  -- the caller named its list, else by the caller, which the script tells.
  redis.call('ZADD', KEYS[2], ticket, h)
  if inbox == '*' then
    if h == succ then
      push_named(h .. ' 0 0 -', ttl)
    else
      wake = h .. ' 0 0 -'
    end
  end
  redis.call('HSET', KEYS[3], '~streak', 0, '~open', now + yield_ms, '~last', now + yield_ms)
  if redis.call('PTTL', KEYS[3]) < yield_ms then redis.call('PEXPIRE', KEYS[3], yield_ms) end
  -- Popping the last waiter deleted the queue and its TTL: it lapses with
  -- the state again.
  redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[3]))
else
  -- The baton is pushed (and given its TTL) before the key is written: a
  -- list of another type refuses the push, and the release goes on as a
  -- plain one. An element already there (no lockbridge release leaves one
  -- while the key lives) would be popped first: the list is started again.
  -- An outsider noted since the last window: the key is left free (below)
  -- for `ms`, and the waiter on the baton, whose block ends empty, queues
  -- and keeps off it as queued waiters do.
  if mark and outsider and every > 0 and yield_ms > 0 then
    clock()
    local last = redis.pcall('HGET', KEYS[3], '~last')
    last = type(last) == 'string' and tonumber(last) or 0
    window = outsider > last - yield_ms and now >= last + 4 * yield_ms
  end
  -- Probes share one schedule in the state: the first asked for starts it
  -- (the next probe ~pnext 2 s later), and each probe due opens a window and
  -- sets the next one ~pint later, ~pint doubling from 2 s to 64 s while no
  -- outsider is noted, back to 2 s once one is. The asking clients ask at
  -- most once a second each, and otherwise pass the baton as before. The
  -- schedule lapses a second after a probe falls due unasked (the lock idle
  -- since): a busy spell that comes later starts it again at 2 s.
  if mark and not window and baton.probe and every > 0 and yield_ms > 0 then
    if not now then clock() end
    local f = redis.pcall('HMGET', KEYS[3], '~pnext', '~pint')
    if not f.err then
      local pnext, pint = tonumber(f[1] or ''), tonumber(f[2] or '') or 1000
      if not pnext or now >= pnext then
        window = pnext ~= nil
        pint = (outsider or not pnext) and 2000 or math.min(2 * pint, 64000)
        redis.call('HSET', KEYS[3], '~pnext', now + pint, '~pint', pint)
        if redis.call('PTTL', KEYS[3]) < pint + 1000 then redis.call('PEXPIRE', KEYS[3], pint + 1000) end
      end
    end
  end
  -- A client outside fair mode (fresh prefixed with 'o') that releases in
  -- a window left for such clients frees the key for the rest of it: a
  -- baton would end the window at the first of their turns.
  if mark and not window and baton.outside and every > 0 and yield_ms > 0 then
    if not now then clock() end
    local open = redis.pcall('HGET', KEYS[3], '~open')
    if type(open) == 'string' and (tonumber(open) or 0) > now then mark, freed = nil, true end
  end
  if window then
    local no = refused({true, 'PUBLISH', channel})
    if no then return no end
    -- ~last outlives the spacing after the window, with or without a queue.
    local set = redis.pcall('HSET', KEYS[3], '~streak', 0, '~open', now + yield_ms, '~last', now + yield_ms)
    if type(set) == 'number' and redis.call('PTTL', KEYS[3]) < 5 * yield_ms then
      redis.call('PEXPIRE', KEYS[3], 5 * yield_ms)
    end
    mark = nil
  end
  if mark then
    local no = refused({true, 'RPUSH', KEYS[5]}, {true, 'PEXPIRE', KEYS[5]})
    if no then return no end
    local msg = baton.fresh .. ' ' .. baton.ttl .. ' ' .. baton.life
    local n = redis.pcall('RPUSH', KEYS[5], msg)
    if type(n) == 'number' and n > 1 then
      redis.call('DEL', KEYS[5])
      n = redis.call('RPUSH', KEYS[5], msg)
    end
    if type(n) == 'number' then
      -- Lapsed waiters popped on the way emptied the queue: as below. (Not
      -- on the strength of the clock alone: a probe's check reads it too.)
      if popped then redis.pcall('HDEL', KEYS[3], '~streak', '~until') end
      redis.call('PEXPIRE', KEYS[5], baton.life)
      redis.call('SET', KEYS[1], baton.fresh, 'PX', baton.ttl)
      return foreign and 4 or 2
    end
  end
  local no = refused({true, 'PUBLISH', channel})
  if no then return no end
  redis.pcall('HDEL', KEYS[3], '~streak', '~until')
end
-- Before the DEL: a PUBLISH that fails (checked above on Redis >= 7) leaves
-- the lock ours and an error that means nothing was deleted.
redis.call('PUBLISH', channel, 'released')
redis.call('DEL', KEYS[1])
return wake or (window and 3) or (freed and 6) or (foreign and 5) or 1
