--[[
  childRefused — a scheduler tells the parent that its child step's child cannot be created: the child's id
  is taken by a task that is not that step's child (a client submitted a task under it; decision 0019
  §5.2). The step fails for good at once — nothing ran, so its effect is none and an undo skips it — and
  the task follows its onFailure, instead of the step's check sending the start again until its timeout,
  or for ever. Fenced by the step's phase: waiting at attempt ARGV[3] for child ARGV[4], whose start is
  the operation asked; anything else (a notice came, an operator's retry started a new child) is STALE.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease
  KEYS[5] compaction index   KEYS[6] open alerts (hash)   KEYS[7] alert outbox (zset)   KEYS[8] search index
  ARGV[1] taskId  ARGV[2] step  ARGV[3] the step's attempt  ARGV[4] childId  ARGV[5] the refusal's reason
  ARGV[6] now  ARGV[7] schedulerId  ARGV[8] the lease token  ARGV[9] the lease duration (ms)
  Returns { OK, json{lockEpoch, action, events, dispatch, status, …}, input, needs... } (action: error | compensate)
          | { STALE, json{reason} } | { UNKNOWN_TASK, '{}' } | { LEASE_BUSY, '{}' }
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local taskId, stepName, attempt, childId = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

if not take_lease(KEYS[4], ARGV[8], ARGV[9], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
local rec = decode_step(redis.call('HGET', taskKey, 's:' .. stepName))
local c = rec and rec.child
if redis.call('HGET', taskKey, 'status') ~= 'running' or not c or rec.status ~= 'waiting' or rec.attempt ~= attempt or c.id ~= childId or c.op ~= 'start' or c.ended then
  return { STALE, cjson.encode({ reason = 'step ' .. stepName .. ' no longer waits for the start of child task ' .. childId }) }
end

local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[3], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, tonumber(ARGV[6])))
ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
local lockEpoch = take_lock(taskKey, ARGV[7])
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
local spec = spec_of(ctx, stepName)
rec = recs_of(ctx)[stepName]
rec.effect = 'none'
local why = 'child task ' .. childId .. ' cannot be created: ' .. ARGV[5] .. ' (a child task id is <task id>:<step>:<attempt>: no other task may be submitted under it)'
local action = give_up(ctx, spec, rec, 'run', 'failed: ' .. why, why, true)
flush(ctx)
return reply(OK, ctx, { lockEpoch = lockEpoch, action = action })
