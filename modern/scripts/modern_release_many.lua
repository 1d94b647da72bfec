-- Releases many locks in one call, each exactly as modern_release.lua would:
-- deleted only if it holds our token, its waiters told first. KEYS[i] lock i;
-- ARGV[2i-1] its token, ARGV[2i] its channel. Returns one entry per key: 0
-- not ours (nothing deleted), 1 + how many clients its release message
-- reached, or that key's own error (nothing deleted for it). One key's error
-- never stops or changes the others: every call is a redis.pcall.
local function failed(v) return type(v) == 'table' and v.err ~= nil end

-- One MGET reads every value: a key whose value is not our token (gone,
-- another token, another type) is read again alone, so that it answers
-- exactly what its own GET would (WRONGTYPE included).
local values = redis.pcall('MGET', unpack(KEYS))
if failed(values) then values = {} end

local out, doomed, nd = {}, {}, 0
for i = 1, #KEYS do
  local token = ARGV[2 * i - 1]
  local v = values[i]
  if v ~= token then v = redis.pcall('GET', KEYS[i]) end
  if failed(v) then
    out[i] = v
  elseif v ~= token then
    out[i] = 0
  else
    -- Publish first: a PUBLISH refused leaves the key as it was.
    local heard = redis.pcall('PUBLISH', ARGV[2 * i], 'released')
    if failed(heard) then
      out[i] = heard
    else
      out[i] = 1 + heard
      nd = nd + 1
      doomed[nd] = i
    end
  end
end

-- One DEL for every key that held its token; refused (a key the user may read
-- but not write), each is deleted alone and answers its own error.
if nd > 0 then
  local keys = {}
  for j = 1, nd do keys[j] = KEYS[doomed[j]] end
  if failed(redis.pcall('DEL', unpack(keys))) then
    for j = 1, nd do
      local e = redis.pcall('DEL', keys[j])
      if failed(e) then out[doomed[j]] = e end
    end
  end
end
return out
