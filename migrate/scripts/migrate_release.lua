-- Deletes the lock only if it holds exactly the value this client wrote, and
-- tells waiters. KEYS[1] lock; ARGV[1] our value, ARGV[2] release channel.
-- Returns 1 deleted, 0 key absent, -1 another value (left alone).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  -- Publish first: a PUBLISH the ACL refuses ends the script before anything
  -- is deleted, so an error reply always means nothing changed.
  redis.call('PUBLISH', ARGV[2], 'released')
  redis.call('DEL', KEYS[1])
  return 1
end
return cur and -1 or 0 -- another value, or none
