-- The baton waiter's mark: writes the waiter's token at the mark's name for
-- ms, over nothing or over another waiter's mark (a token) only. A value of
-- another kind there (another program's key, a key of another type) is left
-- as it was: a plain SET would overwrite it, and a lock held at that name
-- would lose its holder's value. KEYS[1] the mark; ARGV[1] token, ARGV[2] ms.
-- Returns 1 written, 0 left alone (the wait still blocks, with no mark: a
-- release does not pass it a baton on its own strength).
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return 0 end
if v and (#v ~= 32 or not string.match(v, '^%x+$')) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
