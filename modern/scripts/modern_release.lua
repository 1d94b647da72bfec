-- Deletes the lock only if it holds our token, and tells waiters on the
-- release channel. KEYS[1] lock; ARGV[1] token, ARGV[2] channel.
-- Returns 0 not ours (nothing deleted), else 1 + how many clients the
-- release message reached (waiters listening: a releaser that loops lets
-- them in first).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- Publish first: a PUBLISH the ACL refuses ends the script before anything
  -- is deleted, so an error reply always means nothing changed.
  local heard = redis.call('PUBLISH', ARGV[2], 'released')
  redis.call('DEL', KEYS[1])
  return 1 + heard
end
return 0
