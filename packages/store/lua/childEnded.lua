--[[
  childEnded — the leader supervisor delivers a child task's notice to its parent (decision 0019 §5.3,
  R15, R18, U3, U3′, U8). Fenced by the parent bucket's supervisor epoch and by the parent step's phase
  attempt: a notice for an older child (an operator's retry started a new one), an older phase, or a
  step that moved on is a noop, so a delivery repeated after a leader change changes nothing.

  KEYS[1] parent task hash   KEYS[2] deadlines   KEYS[3] the bucket's epoch fence   KEYS[4] finished index
  KEYS[5] compaction index   KEYS[6] open alerts (hash)   KEYS[7] alert outbox (zset)   KEYS[8] search index
  ARGV[1] parentId  ARGV[2] step  ARGV[3] the link's kind (run | compensate)  ARGV[4] the link's attempt
  ARGV[5] childId  ARGV[6] the child's status  ARGV[7] the child's error ('' = none)
  ARGV[8] the child's output (msgpack, '' = none)  ARGV[9] the child's workflow  ARGV[10] now  ARGV[11] epoch

  Run phase, task running: completed → the step processed with the child's output (its dependents start;
  their requests are the reply's dispatch, sent as retry commands), anything else → the step failed
  (`child task … ended compensated: …`) and the task's onFailure; a child cancelled for a timeout → the
  step error. Run phase during the parent's undo (the cancel it asked for): processed (completed) or
  abandoned, and the undo goes on. A step abandoned when its task failed records how the child ended.
  Compensation phase: cancelled / compensated → the step compensated and the undo goes on;
  compensation_failed → the task compensation_failed with an alert.
  The step's effect is what the child's end says (completed: applied; cancelled, compensated: none; else unknown).
  Returns { OK, json{action, kind, events, dispatch, replyTo, client, workflow, createdAt} }
          | { STALE_EPOCH, json{epoch} } | { UNKNOWN_TASK, '{}' }
  action: done | error | compensate | drain | ended | compensated | noop
]]
--@include _common

local taskKey, deadlinesKey, epochKey = KEYS[1], KEYS[2], KEYS[3]
local taskId, stepName, kind, attempt, childId = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local childStatus, childError, childOut, childWorkflow = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local now, epoch = tonumber(ARGV[10]), tonumber(ARGV[11])
local member = deadline_member(taskId, stepName)

local current = newer_epoch(epochKey, epoch)
if current then return { STALE_EPOCH, cjson.encode({ epoch = current }) } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
local noop = { OK, cjson.encode({ action = 'noop' }) }
local rec = decode_step(redis.call('HGET', taskKey, 's:' .. stepName))
if not rec or not rec.child or rec.child.id ~= childId or rec.child.ended then return noop end
local taskStatus = redis.call('HGET', taskKey, 'status')
local run = kind == 'run' and rec.attempt == attempt and (rec.status == 'waiting' or rec.status == 'abandoned')
local undo = kind == 'compensate' and rec.status == 'compensating' and rec.comp ~= nil and rec.comp.attempt == attempt
if not run and not undo then return noop end

local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, now))
ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
local spec = spec_of(ctx, stepName)
rec = recs_of(ctx)[stepName]
local c = rec.child
c.ended = childStatus
redis.call('ZREM', deadlinesKey, member)
touch(ctx, stepName)
local how = 'child task ' .. childId .. ' (' .. childWorkflow .. ') ended ' .. childStatus .. (childError ~= '' and (': ' .. childError) or '')

local action
if undo then
  if childStatus == 'cancelled' or childStatus == 'compensated' then
    rec.status = 'compensated'
    rec.comp.finishedAt = ctx.now
    push_event(ctx, 'compensation_done', stepName, rec.comp.attempt, how)
    next_compensation(ctx)
    action = 'compensated'
  elseif childStatus == 'compensation_failed' then
    give_up(ctx, spec, rec, 'compensate', 'failed: ' .. how, how, true)
    action = 'error'
  else
    -- The child ended without being undone (it cannot, once asked: the link moved on): ask again at the check.
    c.ended = nil
    child_check(ctx, spec, rec, CHILD_FIRST_CHECK_MS)
    action = 'noop'
  end
else
  rec.effect = CHILD_EFFECT[childStatus] or 'unknown'
  if rec.status == 'abandoned' then
    -- The task failed meanwhile (U3′): what the child did is recorded, nothing else changes.
    push_event(ctx, 'step_abandoned', stepName, rec.attempt, how)
    action = 'ended'
  elseif taskStatus == 'compensating' then
    -- The child the undo cancelled ended (U3): a completed child is undone in its turn.
    if childStatus == 'completed' then
      complete_without_agent(ctx, spec, rec, childOut)
    else
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      rec.error = how
      push_event(ctx, 'step_abandoned', stepName, rec.attempt, how)
    end
    next_compensation(ctx)
    action = 'drain'
  elseif taskStatus ~= 'running' then
    action = 'noop'
  elseif c.timedOut then
    local why = 'timed out: child task ' .. childId .. ' did not end within ' .. spec.ch.t .. ' ms (' .. how .. ')'
    action = give_up(ctx, spec, rec, 'run', why, why, false)
  elseif childStatus == 'completed' then
    complete_without_agent(ctx, spec, rec, childOut)
    if start_ready(ctx) then finish_task(ctx, 'completed') end
    action = 'done'
  else
    rec.error = how
    action = give_up(ctx, spec, rec, 'run', 'failed: ' .. how, how, true)
  end
end

flush(ctx)
sync_search_read(ctx)
local f = redis.call('HMGET', taskKey, 'replyTo', 'client', 'workflow', 'createdAt')
return { OK, cjson.encode({ action = action, admit = ctx.admit, kind = kind, events = ctx.events, dispatch = ctx.dispatch, attempt = attempt,
  replyTo = f[1], client = f[2], workflow = f[3], createdAt = tonumber(f[4]) }) }
