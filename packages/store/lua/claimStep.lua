--[[
  claimStep — the agent instance that starts a step takes the step's lease and records itself as the
  step's holder (`lockedBy`), in one atomic call: fenced by the lease (held by another instance → this
  delivery is a duplicate) and by the attempt (the step must be processing at exactly the request's
  attempt). Nothing is written, and the lease is not taken, unless both hold.

  KEYS[1] task hash   KEYS[2] the agent's step lease
  ARGV[1] step  ARGV[2] attempt  ARGV[3] agentId  ARGV[4] the lease token  ARGV[5] kind ('run' | 'compensate')
  ARGV[6] the lease duration (ms)
  Returns { OK, '{}' } | { LEASE_BUSY, '{}' } | { STALE, json{reason} } | { UNKNOWN_TASK, '{}' } | { UNKNOWN_STEP, '{}' }
]]
--@include _common

local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[4] then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', KEYS[1]) == 0 then return { UNKNOWN_TASK, '{}' } end
local rec = decode_step(redis.call('HGET', KEYS[1], 's:' .. ARGV[1]))
if not rec then return { UNKNOWN_STEP, '{}' } end
if ARGV[5] == 'compensate' then
  if rec.status ~= 'compensating' or not rec.comp or rec.comp.parked or rec.comp.attempt ~= tonumber(ARGV[2]) then
    return { STALE, cjson.encode({ reason = 'step ' .. ARGV[1] .. ' is ' .. rec.status .. '; its compensation is not at attempt ' .. ARGV[2] }) }
  end
  rec.comp.lockedBy = ARGV[3]
elseif rec.status ~= 'processing' or rec.attempt ~= tonumber(ARGV[2]) then
  return { STALE, cjson.encode({ reason = 'step ' .. ARGV[1] .. ' is ' .. rec.status .. ' at attempt ' .. rec.attempt }) }
else
  rec.lockedBy = ARGV[3]
end
take_lease(KEYS[2], ARGV[4], ARGV[6], false)
redis.call('HSET', KEYS[1], 's:' .. ARGV[1], cjson.encode(rec))
return { OK, '{}' }
