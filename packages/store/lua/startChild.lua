--[[
  startChild — a scheduler creates a parent step's child task (decision 0019 §5.2, the `start`
  operation): recorded like a submission (createTask), linked to the parent's step, and its ready steps
  started. Idempotent: the child already there → EXISTS (and, when it ended, its notice again); a child
  whose workflow cannot be found (ARGV[5] '') is a cancelled stub with the reason, whose notice fails the
  parent's step.

  KEYS[1] child task hash   KEYS[2] tasks index   KEYS[3] deadlines   KEYS[4] finished index
  KEYS[5] the scheduler's lease on the child   KEYS[6] compaction index   KEYS[7] open alerts   KEYS[8] alert outbox
  KEYS[9] search index
  ARGV[1] childId  ARGV[2] workflow  ARGV[3] version  ARGV[4] input (msgpack)  ARGV[5] plan (JSON, '' = stub)
  ARGV[6] now  ARGV[7] schedulerId  ARGV[8] onFailure  ARGV[9] lease token  ARGV[10] lease ms
  ARGV[11] task deadline, ms after now ('' = none)  ARGV[12] client (the parent's)
  ARGV[13] parentId  ARGV[14] parentStep  ARGV[15] parentAttempt  ARGV[16] holdUntil (epoch ms)
  ARGV[17] the stub's reason

  Returns { OK, json{lockEpoch, events, dispatch, status, …}, input, needs... }
          | { EXISTS, json{status} } | { INVALID_STATE, json{reason} } (the id is another task's) | { LEASE_BUSY, '{}' }
]]
--@include _child

local taskKey, tasksKey, deadlinesKey = KEYS[1], KEYS[2], KEYS[3]
local taskId, now = ARGV[1], tonumber(ARGV[6])
if not take_lease(KEYS[5], ARGV[9], ARGV[10], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 1 then
  local refused = child_link_refusal(taskKey, taskId, ARGV[13], ARGV[14])
  if refused then return refused end
  local status = redis.call('HGET', taskKey, 'status')
  if CHILD_ENDED[status] then child_notice_again(deadlinesKey, taskId, task_now(taskKey, now)) end
  return { EXISTS, cjson.encode({ status = status }) }
end

local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[6], search = KEYS[9] }, taskId, now)
ctx.alertsKey, ctx.outboxKey = KEYS[7], KEYS[8]
local link = { parent = ARGV[13], step = ARGV[14], kind = 'run', attempt = ARGV[15], holdUntil = ARGV[16] }
if ARGV[5] == '' then
  child_tombstone(ctx, tasksKey, ARGV[2], ARGV[3], ARGV[12], link, 'could not start: ' .. ARGV[17])
  return reply(OK, ctx, { lockEpoch = 1 })
end
ctx.plan = cjson.decode(ARGV[5])
redis.call('HSET', taskKey, 'id', taskId, 'workflow', ARGV[2], 'version', ARGV[3], 'input', ARGV[4], 'plan', ARGV[5],
  'status', 'running', 'lockedBy', ARGV[7], 'lockEpoch', 1, 'seq', 0, 'createdAt', now, 'updatedAt', now,
  'onFailure', ARGV[8], 'client', ARGV[12],
  'parent', link.parent, 'parentStep', link.step, 'parentKind', link.kind, 'parentAttempt', link.attempt, 'holdUntil', link.holdUntil)
ctx.recs = {}
for _, s in ipairs(ctx.plan) do
  ctx.recs[s.n] = { status = 'pending', attempt = 0, failureCount = 0 }
  touch(ctx, s.n)
end
redis.call('ZADD', tasksKey, now, taskId)
if ARGV[11] ~= '' then
  local deadlineAt = now + tonumber(ARGV[11])
  redis.call('HSET', taskKey, 'deadlineAt', deadlineAt)
  redis.call('ZADD', deadlinesKey, deadlineAt, deadline_member(taskId, TASK_DEADLINE))
end
push_event(ctx, 'received', nil, nil, 'child of step ' .. link.step .. ' of task ' .. link.parent, 'running')
if start_ready(ctx) then finish_task(ctx, 'completed') end
flush(ctx)
return reply(OK, ctx, { lockEpoch = 1 })
