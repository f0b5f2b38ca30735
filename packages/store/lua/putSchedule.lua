--[[
  putSchedule — creates a schedule, or replaces one with `replace` (decision 0019 §6.2). A replace keeps
  what the firing recorded (lastTick, lastTaskId, the counters, createdAt, paused) — a tick already fired
  is never fired again — and bumps `generation`, so a fire computed from the old definition does nothing.

  KEYS[1] schedule hash   KEYS[2] schedule names (set)   KEYS[3] due (zset name → nextTick)
  ARGV[1] name   ARGV[2] JSON { workflow, version?, client, every?, cron?, timezone?, overlap }
  ARGV[3] input (msgpack; '' = none)   ARGV[4] nextTick (epoch ms; '' = never fires again)
  ARGV[5] now   ARGV[6] replace ('1'/'0')

  Returns { OK, json{ created, generation } } | { EXISTS, '{}' } (the name is taken and replace is '0')
]]
--@include _common

local hash, namesKey, dueKey = KEYS[1], KEYS[2], KEYS[3]
local name, now = ARGV[1], ARGV[5]
local exists = redis.call('EXISTS', hash) == 1
if exists and ARGV[6] ~= '1' then return { EXISTS, '{}' } end
local f = cjson.decode(ARGV[2])
local generation = tonumber(redis.call('HGET', hash, 'generation') or '0') + 1
-- Fields a replace may drop (a cron schedule becoming an every one, an input removed, a version unpinned).
redis.call('HDEL', hash, 'every', 'cron', 'timezone', 'version', 'input')
local set = { 'name', name, 'workflow', f.workflow, 'client', f.client, 'overlap', f.overlap, 'anchor', now, 'updatedAt', now, 'generation', generation }
if f.version and f.version ~= cjson.null then table.insert(set, 'version'); table.insert(set, f.version) end
if f.every and f.every ~= cjson.null then table.insert(set, 'every'); table.insert(set, f.every) end
if f.cron and f.cron ~= cjson.null then table.insert(set, 'cron'); table.insert(set, f.cron) end
if f.timezone and f.timezone ~= cjson.null then table.insert(set, 'timezone'); table.insert(set, f.timezone) end
if ARGV[3] ~= '' then table.insert(set, 'input'); table.insert(set, ARGV[3]) end
if not exists then
  for _, v in ipairs({ 'createdAt', now, 'paused', '0', 'fired', '0', 'skipped', '0', 'missed', '0' }) do table.insert(set, v) end
end
if ARGV[4] ~= '' then table.insert(set, 'nextTick'); table.insert(set, ARGV[4]) else redis.call('HDEL', hash, 'nextTick') end
redis.call('HSET', hash, unpack(set))
redis.call('SADD', namesKey, name)
if ARGV[4] ~= '' and redis.call('HGET', hash, 'paused') ~= '1' then
  redis.call('ZADD', dueKey, ARGV[4], name)
else
  -- Paused (kept by a replace): no next tick until it is resumed.
  redis.call('HDEL', hash, 'nextTick')
  redis.call('ZREM', dueKey, name)
end
return { OK, cjson.encode({ created = not exists, generation = generation }) }
