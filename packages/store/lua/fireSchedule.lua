--[[
  fireSchedule — the leader supervisor fires one tick of a schedule, exactly once (decision 0019 §6.3): the
  tick is recorded and its submission put in the outbox in one fenced transition; the leader publishes the
  outbox afterwards (message id `<client>:<taskId>`), so a repeated publish is a duplicate.

  KEYS[1] schedule hash   KEYS[2] due (zset)   KEYS[3] the slot's epoch fence   KEYS[4] outbox (hash)
  ARGV[1] name   ARGV[2] generation the caller read   ARGV[3] tick (epoch ms)   ARGV[4] task id
  ARGV[5] submission (msgpack)   ARGV[6] nextTick ('' = never fires again)   ARGV[7] missed ticks (counted)
  ARGV[8] '1' skip this tick (overlap skip: the previous task still runs)   ARGV[9] now   ARGV[10] epoch

  Returns { OK, json{ action = fired | skipped | noop, reason? } } | { STALE_EPOCH, json{ epoch } }
  noop: the schedule is gone, paused or changed (generation), or the tick is not after lastTick.
]]
--@include _common

local hash, dueKey, epochKey, outbox = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local name, tick, taskId, now = ARGV[1], tonumber(ARGV[3]), ARGV[4], ARGV[9]
local current = newer_epoch(epochKey, ARGV[10])
if current then return { STALE_EPOCH, cjson.encode({ epoch = current }) } end
local h = redis.call('HMGET', hash, 'generation', 'paused', 'lastTick', 'client')
if not h[1] then return { OK, cjson.encode({ action = 'noop', reason = 'deleted' }) } end
if h[1] ~= ARGV[2] then return { OK, cjson.encode({ action = 'noop', reason = 'changed' }) } end
if h[2] == '1' then return { OK, cjson.encode({ action = 'noop', reason = 'paused' }) } end
if h[3] and tonumber(h[3]) >= tick then return { OK, cjson.encode({ action = 'noop', reason = 'already fired' }) } end
local set = { 'lastTick', tick, 'updatedAt', now }
if ARGV[6] ~= '' then
  table.insert(set, 'nextTick'); table.insert(set, ARGV[6])
  redis.call('ZADD', dueKey, ARGV[6], name)
else
  redis.call('HDEL', hash, 'nextTick')
  redis.call('ZREM', dueKey, name)
end
local missed = tonumber(ARGV[7])
if missed > 0 then redis.call('HINCRBY', hash, 'missed', missed) end
if ARGV[8] == '1' then
  redis.call('HSET', hash, unpack(set))
  redis.call('HINCRBY', hash, 'skipped', 1)
  return { OK, cjson.encode({ action = 'skipped' }) }
end
table.insert(set, 'lastTaskId'); table.insert(set, taskId)
redis.call('HSET', hash, unpack(set))
redis.call('HINCRBY', hash, 'fired', 1)
redis.call('HSET', outbox, h[4] .. '|' .. taskId, ARGV[5])
return { OK, cjson.encode({ action = 'fired' }) }
