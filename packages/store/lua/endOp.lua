--[[
  endOp — a bulk operation's end (decision 0021 §2.2): state `done` (its pass reached the end) or `stopped`
  (interrupted; run it again with its id to resume).

  KEYS[1] the operation's hash
  ARGV[1] state (done | stopped)  ARGV[2] now  ARGV[3] retention (ms)
  Returns { OK, json record } | { UNKNOWN_TASK, '{}' }
]]
--@include _ops

local OK, UNKNOWN_TASK = 0, 2
local opKey = KEYS[1]
if redis.call('EXISTS', opKey) == 0 then return { UNKNOWN_TASK, '{}' } end
redis.call('HSET', opKey, 'state', ARGV[1], 'updatedAt', ARGV[2])
redis.call('PEXPIRE', opKey, tonumber(ARGV[3]))
return { OK, op_record_json(opKey) }
