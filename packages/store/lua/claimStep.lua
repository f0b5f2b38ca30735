--[[
  claimStep — the agent instance that starts a step records itself as its holder (`lockedBy`), fenced
  by its step lease (the lease key must hold its token) and by the attempt (the step must be processing
  at exactly the request's attempt).

  KEYS[1] task hash   KEYS[2] the agent's step lease
  ARGV[1] step  ARGV[2] attempt  ARGV[3] agentId  ARGV[4] the lease token  ARGV[5] kind ('run' | 'compensate')
  Returns { OK, '{}' } | { LEASE_LOST, '{}' } | { STALE, json{reason} } | { UNKNOWN_TASK, '{}' } | { UNKNOWN_STEP, '{}' }
]]
--@include _common

if not holds_lease(KEYS[2], ARGV[4]) then return { LEASE_LOST, '{}' } end
if redis.call('EXISTS', KEYS[1]) == 0 then return { UNKNOWN_TASK, '{}' } end
local rec = decode_step(redis.call('HGET', KEYS[1], 's:' .. ARGV[1]))
if not rec then return { UNKNOWN_STEP, '{}' } end
if ARGV[5] == 'compensate' then
  if rec.status ~= 'compensating' or not rec.comp or rec.comp.attempt ~= tonumber(ARGV[2]) then
    return { STALE, cjson.encode({ reason = 'step ' .. ARGV[1] .. ' is ' .. rec.status .. '; its compensation is not at attempt ' .. ARGV[2] }) }
  end
  rec.comp.lockedBy = ARGV[3]
  save_step(KEYS[1], ARGV[1], rec)
  return { OK, '{}' }
end
if rec.status ~= 'processing' or rec.attempt ~= tonumber(ARGV[2]) then
  return { STALE, cjson.encode({ reason = 'step ' .. ARGV[1] .. ' is ' .. rec.status .. ' at attempt ' .. rec.attempt }) }
end
rec.lockedBy = ARGV[3]
save_step(KEYS[1], ARGV[1], rec)
return { OK, '{}' }
