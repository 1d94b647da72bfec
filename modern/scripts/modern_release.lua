-- Deletes the lock only if it holds our token, and tells waiters on the
-- release channel when one may hear it. KEYS[1] lock, KEYS[2] (optional)
-- the listeners' mark, kept by waits that hear releases (modern_listen.lua);
-- ARGV[1] token, ARGV[2] channel. Returns 0 not ours (nothing deleted), else
-- 1 + how many clients the release message reached (waiters listening: a
-- releaser that loops lets them in first). With a mark named and absent,
-- nothing is published. Without one (a Cluster slot in migration refuses
-- two keys of which one has moved), it publishes at every release.
-- The key and the mark are read with one MGET. MGET reads a key of another
-- type as nil: GET is asked when MGET did not find our token, and fails on
-- such a key as before. A user whose ACL refuses MGET or the mark reads the
-- key alone, and publishes at every release.
local held, listen = nil, true
if KEYS[2] then
  local both = redis.pcall('MGET', KEYS[1], KEYS[2])
  if not both.err then held, listen = both[1], both[2] end
end
if held ~= ARGV[1] then held = redis.call('GET', KEYS[1]) end
if held ~= ARGV[1] then return 0 end
-- Publish first: a PUBLISH the ACL refuses ends the script before anything
-- is deleted, so an error reply always means nothing changed.
local heard = 0
if listen then heard = redis.call('PUBLISH', ARGV[2], 'released') end
redis.call('DEL', KEYS[1])
return 1 + heard
