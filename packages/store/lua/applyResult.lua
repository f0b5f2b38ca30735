--[[
  applyResult — records an agent's result for one step attempt, then starts the steps it unblocks and
  completes the task when every step is processed. Fenced by the step attempt: a result for any
  attempt but the current one, or for a step that is not processing, is rejected (STALE) and changes nothing.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease
  KEYS[5] the step lease of the agent that ran this attempt (deleted once its result is applied)
  KEYS[6] compaction index (zset by finishedAt)
  ARGV[1] taskId  ARGV[2] step  ARGV[3] attempt  ARGV[4] ok ('1'|'0')  ARGV[5] output (msgpack) or error message
  ARGV[6] retryable ('1'|'0')  ARGV[7] now  ARGV[8] schedulerId  ARGV[9] agentId
  ARGV[10] circuit-open retry-after ms ('' = the breaker was not open)   ARGV[11] the lease token
  ARGV[12] kind ('run' | 'compensate')   ARGV[13] the lease duration (ms)

  Outcomes:
    ok                 → step processed; ready steps started; task completed when all are processed.
    failed, permanent  → step failed; task failed (onFailure=error), or the undo begins (onFailure=compensate).
  For kind 'compensate' (the task is compensating, fenced by the compensation's own attempt):
    ok                 → step compensated; the next compensation starts, or the task ends compensated/cancelled.
    failed, permanent  → step compensation_failed; task compensation_failed (the reply asks for an alert).
    circuit open       → the agent did not attempt the step: parked until the breaker half-opens,
                         WITHOUT counting a failure (an open breaker is the service's state, not the step's).
    failed, retryable  → the agent gave up inside its window: the step stays processing and its deadline
                         is moved to now, so the supervisor's next sweep applies the failure ladder.
  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... } | { STALE, json{reason} }
          | { UNKNOWN_TASK, '{}' } | { UNKNOWN_STEP, '{}' } | { LEASE_BUSY, '{}' }
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local finished = { zset = KEYS[3], compact = KEYS[6] }
local taskId, stepName, attempt, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[7])

if not take_lease(KEYS[4], ARGV[11], ARGV[13], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
local rec = decode_step(redis.call('HGET', taskKey, 's:' .. stepName))
if not rec then
  -- A late result for a task retention has compacted (compactFinished.lua): stale, not unknown.
  if redis.call('HEXISTS', taskKey, 'c') == 1 then
    return { STALE, cjson.encode({ reason = 'the task finished and its record was compacted' }) }
  end
  return { UNKNOWN_STEP, '{}' }
end
now = task_now(taskKey, now)
local taskStatus = redis.call('HGET', taskKey, 'status')
local kind = ARGV[12]
local events, dispatch = {}, {}
local alert = nil

if kind == 'compensate' then
  local comp = rec.comp
  if taskStatus ~= 'compensating' or rec.status ~= 'compensating' or not comp or comp.attempt ~= attempt then
    redis.call('HINCRBY', taskKey, 'staleResults', 1)
    return { STALE, cjson.encode({ reason = 'compensation of ' .. stepName .. ' is not running at attempt ' .. attempt .. ' (task ' .. taskStatus .. ', step ' .. rec.status .. ')' }) }
  end
  local lockEpoch = take_lock(taskKey, ARGV[8])
  redis.call('HSET', taskKey, 'updatedAt', now)
  comp.lockedBy = ARGV[9]
  -- The run this result ends is over: its agent's step lease has nothing left to guard.
  redis.call('DEL', KEYS[5])
  local plan = cjson.decode(redis.call('HGET', taskKey, 'plan'))
  if ARGV[4] == '1' then
    rec.status = 'compensated'
    comp.finishedAt = now
    comp.error = nil
    rec.comp = comp
    save_step(taskKey, stepName, rec)
    redis.call('ZREM', deadlinesKey, deadline_member(taskId, stepName))
    push_event(taskKey, events, 'compensation_done', stepName, attempt)
    next_compensation(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch)
  elseif ARGV[10] ~= '' then
    comp.parked = true
    comp.error = ARGV[5]
    comp.completeBy = now + tonumber(ARGV[10])
    rec.comp = comp
    save_step(taskKey, stepName, rec)
    redis.call('ZADD', deadlinesKey, comp.completeBy, deadline_member(taskId, stepName))
    push_event(taskKey, events, 'step_parked', stepName, attempt, ARGV[5])
  elseif ARGV[6] == '0' then
    rec.status = 'compensation_failed'
    comp.finishedAt = now
    comp.error = ARGV[5]
    rec.comp = comp
    save_step(taskKey, stepName, rec)
    redis.call('ZREM', deadlinesKey, deadline_member(taskId, stepName))
    push_event(taskKey, events, 'step_failed', stepName, attempt, ARGV[5])
    finish_task(taskKey, finished, taskId, 'compensation_failed', now, events, 'compensation of ' .. stepName .. ' failed: ' .. ARGV[5])
    alert = { kind = 'compensation_failed', step = stepName, failureCount = comp.failureCount, lastError = ARGV[5] }
  else
    comp.error = ARGV[5]
    comp.completeBy = now
    rec.comp = comp
    save_step(taskKey, stepName, rec)
    redis.call('ZADD', deadlinesKey, now, deadline_member(taskId, stepName))
    push_event(taskKey, events, 'step_failed', stepName, attempt, ARGV[5])
  end
  return reply(OK, taskKey, { lockEpoch = lockEpoch, replyTo = redis.call('HGET', taskKey, 'replyTo'), events = events,
    dispatch = dispatch, status = redis.call('HGET', taskKey, 'status'), alert = alert }, dispatch)
end

if taskStatus ~= 'running' then
  redis.call('HINCRBY', taskKey, 'staleResults', 1)
  return { STALE, cjson.encode({ reason = 'task is ' .. taskStatus }) }
end
if rec.attempt ~= attempt or rec.status ~= 'processing' then
  redis.call('HINCRBY', taskKey, 'staleResults', 1)
  return { STALE, cjson.encode({ reason = 'step ' .. stepName .. ' is ' .. rec.status .. ' at attempt ' .. rec.attempt ..
    ', result is for attempt ' .. attempt }) }
end

local lockEpoch = take_lock(taskKey, ARGV[8])
redis.call('HSET', taskKey, 'updatedAt', now)
rec.lockedBy = ARGV[9]
-- The run this result ends is over: its agent's step lease has nothing left to guard.
redis.call('DEL', KEYS[5])

if ARGV[4] == '1' then
  rec.status = 'processed'
  rec.finishedAt = now
  rec.error = nil
  -- Completion order: compensations run in its reverse.
  rec.order = redis.call('HINCRBY', taskKey, 'doneSeq', 1)
  save_step(taskKey, stepName, rec)
  redis.call('HSET', taskKey, 'o:' .. stepName, ARGV[5])
  redis.call('ZREM', deadlinesKey, deadline_member(taskId, stepName))
  push_event(taskKey, events, 'step_done', stepName, attempt)
  local plan = cjson.decode(redis.call('HGET', taskKey, 'plan'))
  if start_ready(taskKey, deadlinesKey, taskId, plan, now, events, dispatch) then
    finish_task(taskKey, finished, taskId, 'completed', now, events)
  end
elseif ARGV[10] ~= '' then
  rec.status = 'parked'
  rec.error = ARGV[5]
  rec.completeBy = now + tonumber(ARGV[10])
  save_step(taskKey, stepName, rec)
  redis.call('ZADD', deadlinesKey, rec.completeBy, deadline_member(taskId, stepName))
  push_event(taskKey, events, 'step_parked', stepName, attempt, ARGV[5])
elseif ARGV[6] == '0' then
  rec.status = 'failed'
  rec.finishedAt = now
  rec.error = ARGV[5]
  save_step(taskKey, stepName, rec)
  redis.call('ZREM', deadlinesKey, deadline_member(taskId, stepName))
  push_event(taskKey, events, 'step_failed', stepName, attempt, ARGV[5])
  local reason = 'step ' .. stepName .. ' failed: ' .. ARGV[5]
  if redis.call('HGET', taskKey, 'onFailure') == 'compensate' then
    local plan = cjson.decode(redis.call('HGET', taskKey, 'plan'))
    begin_undo(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch, 'compensated', reason)
  else
    finish_task(taskKey, finished, taskId, 'failed', now, events, reason)
  end
else
  rec.error = ARGV[5]
  rec.completeBy = now
  save_step(taskKey, stepName, rec)
  redis.call('ZADD', deadlinesKey, now, deadline_member(taskId, stepName))
  push_event(taskKey, events, 'step_failed', stepName, attempt, ARGV[5])
end

return reply(OK, taskKey, { lockEpoch = lockEpoch, replyTo = redis.call('HGET', taskKey, 'replyTo'), events = events,
  dispatch = dispatch, status = redis.call('HGET', taskKey, 'status') }, dispatch)
