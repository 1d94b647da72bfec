-- A wait that hears releases marks that it listens, so that a release
-- publishes only while someone may hear it (see the release script). The
-- mark is written over nothing or over another listener's mark only: any
-- other value at its name (another program's key, a key of another type) is
-- left as it was. KEYS[1] the mark; ARGV[1] its TTL, ms. Returns 1 written,
-- 0 left alone (releases beside that value publish, as a foreign value at
-- the mark's name reads as a listener).
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' or (v and v ~= 'listening') then return 0 end
redis.call('SET', KEYS[1], 'listening', 'PX', ARGV[1])
return 1
