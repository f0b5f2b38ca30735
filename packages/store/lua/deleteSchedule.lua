--[[
  deleteSchedule — removes a schedule (decision 0019 §6.2): its record, its name and its due entry. A fire
  computed before finds no record and does nothing; a submission already in the outbox is still published
  (its tick was recorded before the delete).

  KEYS[1] schedule hash   KEYS[2] schedule names (set)   KEYS[3] due (zset)
  ARGV[1] name

  Returns { OK, '{}' } | { UNKNOWN_SCHEDULE, '{}' }
]]
--@include _common

local hash, namesKey, dueKey = KEYS[1], KEYS[2], KEYS[3]
local name = ARGV[1]
redis.call('ZREM', dueKey, name)
redis.call('SREM', namesKey, name)
if redis.call('DEL', hash) == 0 then return { UNKNOWN_SCHEDULE, '{}' } end
return { OK, '{}' }
