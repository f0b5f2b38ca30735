--[[
  startOp — creates a bulk operation's record (decision 0021 §2.2), or returns the existing one when the
  same id comes again with the same action and filter (a resume). In the namespace's ops slot.

  KEYS[1] the operation's hash   KEYS[2] the operations index (zset id → createdAt)
  ARGV[1] id  ARGV[2] action (cancel | retry)  ARGV[3] filter (canonical JSON)  ARGV[4] step ('' = none)
  ARGV[5] reason  ARGV[6] asOf (the snapshot time, epoch ms)  ARGV[7] by (the operator's client id)
  ARGV[8] matched (the count at asOf)  ARGV[9] now  ARGV[10] retention (ms)
  ARGV[11] the ops hashes' key prefix (old operations are dropped: their keys are built here, in this slot)
  Returns { OK, json record, 'created' | 'resumed' } | { INVALID_STATE, json{reason} }
]]
--@include _ops

local OK, INVALID_STATE = 0, 4
local opKey, indexKey = KEYS[1], KEYS[2]
local now, retention = tonumber(ARGV[9]), tonumber(ARGV[10])

-- Operations older than the retention go, with their records (O(due)).
for _, old in ipairs(redis.call('ZRANGEBYSCORE', indexKey, '-inf', now - retention, 'LIMIT', 0, 100)) do
  redis.call('DEL', ARGV[11] .. old)
  redis.call('ZREM', indexKey, old)
end

if redis.call('EXISTS', opKey) == 1 then
  local f = redis.call('HMGET', opKey, 'action', 'filter')
  if f[1] ~= ARGV[2] or f[2] ~= ARGV[3] then
    return { INVALID_STATE, cjson.encode({ reason = 'operation ' .. ARGV[1] .. ' exists with another action or filter (' .. tostring(f[1]) .. ' ' .. tostring(f[2]) .. '); use a new --op' }) }
  end
  -- A finished operation stays done (its pass reached the end); an interrupted one runs again.
  if redis.call('HGET', opKey, 'state') ~= 'done' then redis.call('HSET', opKey, 'state', 'running', 'updatedAt', now) end
  redis.call('PEXPIRE', opKey, retention)
  return { OK, op_record_json(opKey), 'resumed' }
end
redis.call('HSET', opKey, 'id', ARGV[1], 'action', ARGV[2], 'filter', ARGV[3], 'step', ARGV[4], 'reason', ARGV[5],
  'asOf', ARGV[6], 'by', ARGV[7], 'matched', ARGV[8], 'createdAt', now, 'updatedAt', now, 'state', 'running',
  'cursor', '', 'batch', 0, 'acted', 0, 'already', 0, 'skipped', 0, 'missing', 0, 'failed', 0)
redis.call('PEXPIRE', opKey, retention)
redis.call('ZADD', indexKey, now, ARGV[1])
return { OK, op_record_json(opKey), 'created' }
