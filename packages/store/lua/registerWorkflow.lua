--[[
  registerWorkflow — stores a workflow definition under a version. Versions are immutable: the same
  document under an existing version is accepted again (idempotent); a different one is refused.

  KEYS[1] workflow hash (fields: latest, v:<n> → JSON, c:<n> → canonical form, t:<n> → registered at)   KEYS[2] workflow names (set)
  ARGV[1] name  ARGV[2] requested version ('' = next)  ARGV[3] canonical form  ARGV[4] definition JSON (no version)
  ARGV[5] now (epoch ms; stored as t:<n>, the registration time)

  Returns { OK, version } | { EXISTS, version } (same document already there) | { VERSION_CONFLICT, version }
]]
--@include _common

local wfKey, namesKey = KEYS[1], KEYS[2]
local latest = tonumber(redis.call('HGET', wfKey, 'latest') or '0')
local version
if ARGV[2] == '' then
  -- No version asked for: the same document as the latest is that version again.
  if latest > 0 and redis.call('HGET', wfKey, 'c:' .. latest) == ARGV[3] then return { EXISTS, latest } end
  version = latest + 1
else
  version = tonumber(ARGV[2])
  local existing = redis.call('HGET', wfKey, 'c:' .. version)
  if existing then
    if existing == ARGV[3] then return { EXISTS, version } end
    return { VERSION_CONFLICT, version }
  end
end
redis.call('HSET', wfKey, 'v:' .. version, ARGV[4], 'c:' .. version, ARGV[3], 't:' .. version, ARGV[5])
if version > latest then redis.call('HSET', wfKey, 'latest', version) end
redis.call('SADD', namesKey, ARGV[1])
return { OK, version }
