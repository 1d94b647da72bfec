-- Removes one census entry only if it still holds the value judged stale (a
-- client that refreshed meanwhile stays). KEYS[1] census hash, KEYS[2] the
-- namespace's gate record; ARGV[1] id, ARGV[2] the stale value, ARGV[3] the
-- entry's seen_ms when it is in legacy mode, else "". A legacy entry's last
-- sighting is kept in the gate record (legacy_until_ms, raised only), so that
-- pruning never erases the evidence the tool's gate counts for its window.
-- Returns 1 removed, 0 kept.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
if ARGV[3] ~= '' then
  local g = redis.call('TYPE', KEYS[2])['ok']
  if g == 'hash' or g == 'none' then
    local c = tonumber(redis.call('HGET', KEYS[2], 'legacy_until_ms') or '-1') or -1
    if tonumber(ARGV[3]) > c then
      redis.call('HSET', KEYS[2], 'legacy_until_ms', ARGV[3])
    end
  end
end
return redis.call('HDEL', KEYS[1], ARGV[1])
