--[[
  purgeFinished — retention: removes up to ARGV[3] tasks that finished before ARGV[2] (their task hash,
  full or compacted, with steps and outputs, and their entries in the tasks, finished and compaction
  indexes). Fenced by the supervisor epoch like every supervisor write. Running tasks are never in the
  finished index.

  One bucket per call (decision 0015): every key is the bucket's.
  KEYS[1] finished index   KEYS[2] tasks index   KEYS[3] the bucket's epoch fence   KEYS[4] compaction index
  ARGV[1] the bucket's task key prefix ("triad:<ns>:{<ns>:bNN}:task:")   ARGV[2] cutoff (epoch ms)   ARGV[3] limit
  ARGV[4] epoch   KEYS[5] the bucket's search index: a tagged task's members leave it with the task (decision 0021)
  Returns { OK, removed, json (an array of pairs: client, array of object names) } | { STALE_EPOCH, current }: the objects each
  removed task owned (its `objs`, decision 0021 §4.6), for the caller to delete from its client's bucket

  The task keys are derived from the index here (not passed in KEYS) because which tasks are due is only
  known inside the script; the prefix carries the bucket's hash tag, so they are in the script's slot.
]]
--@include _common

local current = newer_epoch(KEYS[3], ARGV[4])
if current then return { STALE_EPOCH, current } end
local owned = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(due) do
  local f = redis.call('HMGET', ARGV[1] .. id, 'tags', 'workflow', 'client', 'createdAt', 'objs')
  if f[1] and f[4] then
    redis.call('ZREM', KEYS[5], unpack(all_search_members(f[1], f[2] or '', f[3] or 'default', f[4], id)))
  end
  if f[5] then owned[#owned + 1] = { f[3] or 'default', cjson.decode(f[5]) } end
  redis.call('DEL', ARGV[1] .. id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
  -- Not yet compacted (retention shorter than the compaction delay, or a sweep that had not got to it).
  redis.call('ZREM', KEYS[4], id)
end
return { OK, #due, #owned > 0 and cjson.encode(owned) or '[]' }
