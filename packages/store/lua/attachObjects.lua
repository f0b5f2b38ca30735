--[[
  attachObjects — the object garbage collection's attach (decision 0021 §4.6): an object found in a
  client's bucket, under the name of a task that exists, becomes that task's (`objs`), so retention
  deletes it with the task. Fenced by the supervisor epoch like every supervisor write.

  KEYS[1] task hash   KEYS[2] the task's bucket's epoch fence
  ARGV[1] the bucket's client   ARGV[2] the object name   ARGV[3] epoch
  Returns { OK, 'none' } no such task | { OK, 'other' } the task is another client's
        | { OK, 'owned' } already listed | { OK, 'attached' } | { STALE_EPOCH, current }
]]
--@include _common

local current = newer_epoch(KEYS[2], ARGV[3])
if current then return { STALE_EPOCH, current } end
local f = redis.call('HMGET', KEYS[1], 'client', 'objs', 'id')
if not f[3] then return { OK, 'none' } end
if (f[1] or 'default') ~= ARGV[1] then return { OK, 'other' } end
local objs = f[2] and cjson.decode(f[2]) or {}
for _, n in ipairs(objs) do
  if n == ARGV[2] then return { OK, 'owned' } end
end
objs[#objs + 1] = ARGV[2]
redis.call('HSET', KEYS[1], 'objs', cjson.encode(objs))
return { OK, 'attached' }
