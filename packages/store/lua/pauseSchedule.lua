--[[
  pauseSchedule — pauses a schedule (it leaves the due index) or resumes it (decision 0019 §6.2). A resume
  starts from now: `since` records the moment, and no tick of the paused period is caught up. Either bumps
  `generation`, so a fire computed before the change does nothing.

  KEYS[1] schedule hash   KEYS[2] due (zset name → nextTick)
  ARGV[1] name   ARGV[2] '1' pause, '0' resume   ARGV[3] nextTick for a resume ('' = never fires again)   ARGV[4] now

  Returns { OK, json{ paused, changed } } | { UNKNOWN_SCHEDULE, '{}' }
]]
--@include _common

local hash, dueKey = KEYS[1], KEYS[2]
local name, pause, now = ARGV[1], ARGV[2] == '1', ARGV[4]
if redis.call('EXISTS', hash) == 0 then return { UNKNOWN_SCHEDULE, '{}' } end
local was = redis.call('HGET', hash, 'paused') == '1'
if was == pause then return { OK, cjson.encode({ paused = pause, changed = false }) } end
redis.call('HINCRBY', hash, 'generation', 1)
if pause then
  redis.call('HSET', hash, 'paused', '1', 'updatedAt', now)
  redis.call('HDEL', hash, 'nextTick')
  redis.call('ZREM', dueKey, name)
else
  redis.call('HSET', hash, 'paused', '0', 'since', now, 'updatedAt', now)
  if ARGV[3] ~= '' then
    redis.call('HSET', hash, 'nextTick', ARGV[3])
    redis.call('ZADD', dueKey, ARGV[3], name)
  else
    redis.call('HDEL', hash, 'nextTick')
  end
end
return { OK, cjson.encode({ paused = pause, changed = true }) }
