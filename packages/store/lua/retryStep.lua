--[[
  retryStep — an operator resubmits what stopped a task: a step that failed for good (failed, error),
  one parked for a long back-off, one abandoned when its task failed, or the failed compensation of a
  task that failed while being undone — optionally with a corrected task input. The phase starts again
  at once with a new attempt and a fresh failure budget (failures, breaker refusals, give-up time); the
  task is running (or compensating) again, its deadline lifted, and all its open alerts are closed.
  Restarting a run of a failed task restarts every step it stopped: the failed or errored one and the
  abandoned ones, whichever is named (they were stopped together; leaving one stopped would leave the
  task running with nothing to run). A run retry of a running task restarts the named step only.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] open alerts (hash)
  KEYS[5] the scheduler's task lease   KEYS[6] compaction index   KEYS[7] alert outbox (zset)
  KEYS[8] the bucket's search index (decision 0021)
  ARGV[1] taskId  ARGV[2] step ('' = the task's failed step)  ARGV[3] new input (msgpack, '' = keep)
  ARGV[4] now  ARGV[5] schedulerId  ARGV[6] the lease token  ARGV[7] the lease duration (ms)
  ARGV[11] the limited table (JSON, '' = none; decision 0020): a restarted phase of a limited agent type queues
  A step waiting for a limit (`queued`) has nothing to retry: INVALID_STATE (decision 0020 Q13).

  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status, step}, input, needs... }
          | { UNKNOWN_TASK, '{}' } | { UNKNOWN_STEP, '{}' } | { INVALID_STATE, json{reason} } | { LEASE_BUSY, '{}' }
  Events: step_retried (reason "operator retry"), step_started for other restarted steps.
]]
--@include _common

local taskKey, deadlinesKey, alertsKey = KEYS[1], KEYS[2], KEYS[4]
local taskId, stepName = ARGV[1], ARGV[2]

if not take_lease(KEYS[5], ARGV[6], ARGV[7], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
-- A bulk retry (decision 0021 §2.3): ARGV[8] its id ('' = none), ARGV[9] the status it acts on, ARGV[10] its snapshot time.
local refused, bo = op_fence(taskKey, ARGV[8], ARGV[9], ARGV[10])
if refused then return refused end
local taskStatus = redis.call('HGET', taskKey, 'status')
if taskStatus ~= 'running' and taskStatus ~= 'failed' and taskStatus ~= 'compensation_failed' then
  return { INVALID_STATE, cjson.encode({ reason = 'the task is ' .. taskStatus .. '; only a failed, compensation_failed or running task has a step to retry' }) }
end
local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[3], compact = KEYS[6], search = KEYS[8] }, taskId, task_now(taskKey, tonumber(ARGV[4])))
ctx.alertsKey, ctx.outboxKey = alertsKey, KEYS[7]
set_limited(ctx, ARGV[11])
local recs = recs_of(ctx)
local spec, rec
for _, s in ipairs(plan_of(ctx)) do
  local r = recs[s.n]
  local wanted = (taskStatus == 'compensation_failed' and r.status == 'compensation_failed')
    or (taskStatus ~= 'compensation_failed' and (r.status == 'failed' or r.status == 'error'))
  if (stepName == '' and wanted) or s.n == stepName then
    spec, rec = s, r
    break
  end
end
if not spec then
  if stepName == '' then return { INVALID_STATE, cjson.encode({ reason = 'the task has no failed step; name one with --step' }) } end
  return { UNKNOWN_STEP, '{}' }
end

-- What may be retried: a failed compensation of a task that failed while compensating; a failed,
-- errored or parked step of a task that failed or is still running; a step abandoned when its task failed.
local compensation = rec.status == 'compensation_failed' and taskStatus == 'compensation_failed'
if not compensation then
  if taskStatus == 'compensation_failed' then
    return { INVALID_STATE, cjson.encode({ reason = 'the task failed while compensating; retry its failed compensation step' }) }
  end
  if rec.status == 'queued' and rec.q then
    return { INVALID_STATE, cjson.encode({ reason = 'step ' .. spec.n .. ' waits for a limit of ' .. rec.q.a .. '; it starts when its turn comes — there is nothing to retry' }) }
  end
  local retryable = rec.status == 'failed' or rec.status == 'error' or rec.status == 'parked' or (rec.status == 'abandoned' and taskStatus == 'failed')
  if not retryable then
    return { INVALID_STATE, cjson.encode({ reason = 'step ' .. spec.n .. ' is ' .. rec.status .. '; only a failed, error or parked step (or one abandoned when its task failed) can be retried' }) }
  end
end

if ARGV[3] ~= '' then redis.call('HSET', taskKey, 'input', ARGV[3]) end
local lockEpoch = take_lock(taskKey, ARGV[5])
local newStatus = compensation and 'compensating' or 'running'

-- The task lives again before anything starts: a step of it may end it once more at once (a condition
-- that cannot be read fails its step at start, decision 0019), and that ending, its alert included, must
-- stand. Its open alerts are closed (their ids start with "<taskId>:").
if taskStatus ~= newStatus then
  redis.call('HSET', taskKey, 'status', newStatus)
  note_status(ctx, newStatus)
  redis.call('HDEL', taskKey, 'finishedAt')
  if not compensation then redis.call('HDEL', taskKey, 'error') end
  redis.call('ZREM', ctx.finished.zset, taskId)
end
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
local prefix = taskId .. ':'
for _, field in ipairs(redis.call('HKEYS', alertsKey)) do
  if string.sub(field, 1, #prefix) == prefix then redis.call('HDEL', alertsKey, field) end
end

-- A fresh budget for the phase: failures, breaker refusals and the give-up time start again.
local function reset(ph)
  ph.failureCount, ph.circuitCount, ph.giveUpAt, ph.error, ph.finishedAt = 0, 0, nil, nil, nil
end

if compensation and spec.fe then
  -- A fan-out step (decision 0019 U6): its failed element compensations start again, fresh, before those
  -- not started yet; the step's undo then goes on, maxParallel at once.
  local fe = rec.fe
  local again = {}
  elements_load(ctx, spec, fe.hi or 0)
  for _, i in ipairs(fe.undo) do
    local e = recs_of(ctx)[element_name(spec.n, i)]
    if e.status == 'compensation_failed' then
      reset(phase(e, 'compensate'))
      again[#again + 1] = i
    end
  end
  for k = fe.undoNext, #fe.undo do again[#again + 1] = fe.undo[k] end
  fe.undo, fe.undoNext, fe.compFailed, fe.compRunning = again, 1, 0, 0
  rec.status = 'compensating'
  touch(ctx, spec.n)
  push_event(ctx, 'step_retried', spec.n, nil, 'operator retry of the compensation', newStatus)
  fe_comp_fill(ctx, spec, rec)
elseif compensation and spec.k == 'c' then
  -- A child step (decision 0019 O1): its child is asked to undo again.
  reset(phase(rec, 'compensate'))
  child_undo_begin(ctx, spec, rec)
  push_event(ctx, 'step_retried', spec.n, rec.comp.attempt, 'operator retry of the compensation', newStatus)
elseif compensation then
  -- Resubmit the failed compensation; the undo then goes on in reverse order.
  local comp = phase(rec, 'compensate')
  reset(comp)
  if not maybe_queue(ctx, spec, rec, 'compensate', 'step_retried', 'operator retry of the compensation') then
    start_attempt(ctx, spec, rec, 'compensate')
    push_event(ctx, 'step_retried', spec.n, comp.attempt, 'operator retry of the compensation', newStatus)
  end
else
  -- The named step, and in a failed task every step stopped with it, start again (their dependencies
  -- are done: each had become ready).
  local STOPPED = { failed = true, error = true, abandoned = true }
  for _, s in ipairs(plan_of(ctx)) do
    local r = recs[s.n]
    if s.n == spec.n or (taskStatus == 'failed' and STOPPED[r.status]) then
      reset(r)
      r.status = 'pending'
      touch(ctx, s.n)
    end
  end
  -- A task that failed (by its deadline or otherwise) gets a new life without its deadline; a running
  -- task keeps it.
  if taskStatus == 'failed' then
    redis.call('HDEL', taskKey, 'deadlineAt')
    redis.call('ZREM', deadlinesKey, deadline_member(taskId, TASK_DEADLINE))
  end
  -- Readiness may start the step, skip it (its condition, on a corrected input, is now false) — and then
  -- the task may be done — or fail it again.
  if start_ready(ctx) then finish_task(ctx, 'completed') end
  -- The events: step_started for each, the named one as the operator's retry.
  for _, e in ipairs(ctx.events) do
    if e.step == spec.n and e.type == 'step_started' and e.item == nil then e.type, e.reason, e.status = 'step_retried', 'operator retry', newStatus end
  end
end
op_record(taskKey, bo)
flush(ctx)
return reply(OK, ctx, { lockEpoch = lockEpoch, step = spec.n })
