--[[
  checkpointOp — records that a bulk operation's batch is done (decision 0021 §2.2): its cursor and its
  outcome counts, only when `batch` is the record's batch + 1, so a repeated checkpoint changes nothing.

  KEYS[1] the operation's hash
  ARGV[1] batch  ARGV[2] the query cursor after it ('' = the end)  ARGV[3] acted  ARGV[4] already
  ARGV[5] skipped  ARGV[6] missing  ARGV[7] failed  ARGV[8] now  ARGV[9] retention (ms)
  Returns { OK, json record } | { UNKNOWN_TASK, '{}' } (no such operation)
]]
--@include _ops

local OK, UNKNOWN_TASK = 0, 2
local opKey = KEYS[1]
if redis.call('EXISTS', opKey) == 0 then return { UNKNOWN_TASK, '{}' } end
if tonumber(redis.call('HGET', opKey, 'batch')) + 1 == tonumber(ARGV[1]) then
  redis.call('HSET', opKey, 'batch', ARGV[1], 'cursor', ARGV[2], 'updatedAt', ARGV[8])
  redis.call('HINCRBY', opKey, 'acted', ARGV[3])
  redis.call('HINCRBY', opKey, 'already', ARGV[4])
  redis.call('HINCRBY', opKey, 'skipped', ARGV[5])
  redis.call('HINCRBY', opKey, 'missing', ARGV[6])
  redis.call('HINCRBY', opKey, 'failed', ARGV[7])
  redis.call('PEXPIRE', opKey, tonumber(ARGV[9]))
end
return { OK, op_record_json(opKey) }
