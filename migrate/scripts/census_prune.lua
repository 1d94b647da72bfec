-- Removes one census entry only if it still holds the value judged stale (a
-- client that refreshed meanwhile stays). KEYS[1] census hash; ARGV[1] id,
-- ARGV[2] the stale value. Returns 1 removed, 0 kept.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
