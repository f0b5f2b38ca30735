-- Shared fragment of the child operations (startChild, cancelChild, undoChild; decision 0019 §5.2),
-- inlined by the loader. Each runs on the child's bucket under the child's own lease; none touches the
-- parent (its step hears of the child's end through the notice).
--@include _common

-- The child's link to its parent's step: `parent`, `parentStep`, `parentKind` (run | compensate),
-- `parentAttempt`, `holdUntil`. A task with the child's id that is not linked to this step (a client
-- chose that id) is refused. Returns the refusal, or nil.
local function child_link_refusal(taskKey, childId, parentId, parentStep)
  local f = redis.call('HMGET', taskKey, 'parent', 'parentStep')
  if f[1] ~= parentId or f[2] ~= parentStep then
    return { INVALID_STATE, cjson.encode({ reason = 'task id ' .. childId .. ' is taken by a task that is not the child of step ' .. parentStep .. ' of task ' .. parentId }) }
  end
  return nil
end

-- The link only moves forward — (run, a) < (compensate, b), a higher attempt within a kind — so a
-- delayed operation of an older phase never rewinds it.
local LINK_RANK = { run = 0, compensate = 1 }
local function child_link_forward(taskKey, kind, attempt)
  local f = redis.call('HMGET', taskKey, 'parentKind', 'parentAttempt')
  local rk, ra, nk = LINK_RANK[f[1]] or 0, tonumber(f[2]) or 0, LINK_RANK[kind] or 0
  if nk > rk or (nk == rk and attempt > ra) then redis.call('HSET', taskKey, 'parentKind', kind, 'parentAttempt', attempt) end
end

local CHILD_ENDED = { completed = true, failed = true, compensated = true, compensation_failed = true, cancelled = true }

-- A child that already ended answers an operation with its notice again (the parent missed it, or the
-- operation came after the end): due now.
local function child_notice_again(deadlinesKey, childId, now)
  redis.call('ZADD', deadlinesKey, now, childId .. '|' .. PARENT_NOTICE)
end

-- A task record for a child that never ran (decision 0019 §5.2): `cancelled` with `reason` — a cancel or
-- undo that came first (so a late start finds it and creates nothing), or a start whose workflow cannot
-- be found. Its end is its notice. `link`: { parent, step, kind, attempt, holdUntil }.
local function child_tombstone(ctx, tasksKey, workflow, version, client, link, reason)
  local now = ctx.now
  redis.call('HSET', ctx.taskKey, 'id', ctx.taskId, 'workflow', workflow, 'version', version, 'plan', '[]', 'status', 'running',
    'lockEpoch', 1, 'seq', 0, 'createdAt', now, 'updatedAt', now, 'onFailure', 'error', 'client', client,
    'parent', link.parent, 'parentStep', link.step, 'parentKind', link.kind, 'parentAttempt', link.attempt, 'holdUntil', link.holdUntil)
  redis.call('ZADD', tasksKey, now, ctx.taskId)
  ctx.plan, ctx.recs = {}, {}
  push_event(ctx, 'received', nil, nil, nil, 'running')
  finish_task(ctx, 'cancelled', reason)
end

-- cancelChild and undoChild (decision 0019 §5.2), by the table there:
--   missing      → a tombstone (cancelled) and its notice
--   running      → its undo begins, to end `cancelled`
--   compensating → the link moves on (its end's notice will say how it ended)
--   completed / failed, for an undo → taken out of the finished indexes, its undo begins, to end `compensated`
--   ended otherwise → its notice again
-- KEYS[1] child task hash  KEYS[2] tasks index  KEYS[3] deadlines  KEYS[4] finished index  KEYS[5] the lease on
-- the child  KEYS[6] compaction index  KEYS[7] search index
-- ARGV[1] childId  ARGV[2] parentId  ARGV[3] parentStep  ARGV[4] parentKind (run | compensate)  ARGV[5] parentAttempt
-- ARGV[6] now  ARGV[7] schedulerId  ARGV[8] lease token  ARGV[9] lease ms  ARGV[10] reason  ARGV[11] workflow (for a
-- tombstone)  ARGV[12] client (the parent's)  ARGV[13] holdUntil
local function child_stop(op)
  local taskKey, deadlinesKey = KEYS[1], KEYS[3]
  local taskId = ARGV[1]
  if not take_lease(KEYS[5], ARGV[8], ARGV[9], true) then return { LEASE_BUSY, '{}' } end
  local reason = ARGV[10]
  if redis.call('EXISTS', taskKey) == 0 then
    local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[6], search = KEYS[7] }, taskId, tonumber(ARGV[6]))
    local link = { parent = ARGV[2], step = ARGV[3], kind = ARGV[4], attempt = ARGV[5], holdUntil = ARGV[13] }
    child_tombstone(ctx, KEYS[2], ARGV[11], 0, ARGV[12], link, 'cancelled before it started: ' .. reason)
    return reply(OK, ctx, { lockEpoch = 1, action = 'tombstone' })
  end
  local refused = child_link_refusal(taskKey, taskId, ARGV[2], ARGV[3])
  if refused then return refused end
  if op == 'undo' and redis.call('HEXISTS', taskKey, 'c') == 1 and redis.call('HGET', taskKey, 'status') == 'completed' then
    -- Compacted by retention (decision 0019 §2.8): its steps' records are gone, so nothing can undo it.
    return { INVALID_STATE, cjson.encode({ reason = "the child's record was compacted by retention; its effects can no longer be undone" }) }
  end
  child_link_forward(taskKey, ARGV[4], tonumber(ARGV[5]))
  local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[6], search = KEYS[7] }, taskId, task_now(taskKey, tonumber(ARGV[6])))
  local status = redis.call('HGET', taskKey, 'status')
  local action, lockEpoch
  if status == 'running' then
    lockEpoch = take_lock(taskKey, ARGV[7])
    begin_undo(ctx, 'cancelled', reason)
    action = 'cancelling'
  elseif status == 'compensating' then
    action = 'linked'
  elseif op == 'undo' and (status == 'completed' or status == 'failed') then
    -- Undone like an operator's retry revives a task: out of the finished and compaction indexes first.
    redis.call('ZREM', ctx.finished.zset, taskId)
    redis.call('ZREM', ctx.finished.compact, taskId)
    redis.call('HDEL', taskKey, 'finishedAt')
    lockEpoch = take_lock(taskKey, ARGV[7])
    begin_undo(ctx, 'compensated', reason)
    action = 'undoing'
  else
    child_notice_again(deadlinesKey, taskId, ctx.now)
    action = 'ended'
  end
  flush(ctx)
  return reply(OK, ctx, { lockEpoch = lockEpoch or tonumber(redis.call('HGET', taskKey, 'lockEpoch')) or 0, action = action })
end
