--[[
  expireStep — the supervisor's transition for one step whose completeBy has passed. Fenced by the
  supervisor leader epoch: a deposed leader's write is rejected (STALE_EPOCH) and changes nothing.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] supervisor epoch (string)   KEYS[4] finished index
  KEYS[5] compaction index
  ARGV[1] taskId  ARGV[2] step  ARGV[3] now  ARGV[4] epoch

  The failure ladder comes from the task's plan (l = { retries, longBackoffMs, maxFailures }):
    processing, expired: failureCount+1, then
      failureCount >= maxFailures   → action 'error': step error, task failed, operator alert
      failureCount <= retries       → action 'retry': attempt+1, completeBy = now + budget
      otherwise                     → action 'park':  status parked until now + longBackoffMs
    parked, park time passed         → action 'retry' (the failure was already counted)
  A step being compensated (task compensating) climbs its compensation's own ladder the same way;
  its last rung ends the task compensation_failed (action 'error', alert kind compensation_failed).
  With onFailure=compensate, a run step's last rung begins the undo instead (action 'compensate': the
  reply's dispatch is the first compensation, for the scheduler to publish).
  Anything else (task finished, step already processed, deadline moved) → action 'noop' and the index
  entry is cleaned up when it no longer names a live deadline.
  Returns { OK, json{action, kind, events, dispatch, replyTo, failureCount, lastError, onFailure, attempt} }
          | { STALE_EPOCH, json{epoch} } | { UNKNOWN_TASK, '{}' } (index entry removed)
]]
--@include _common

local taskKey, deadlinesKey, epochKey = KEYS[1], KEYS[2], KEYS[3]
local finished = { zset = KEYS[4], compact = KEYS[5] }
local taskId, stepName, now, epoch = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local member = deadline_member(taskId, stepName)

local current = tonumber(redis.call('GET', epochKey) or '0')
if epoch < current then return { STALE_EPOCH, cjson.encode({ epoch = current }) } end

if redis.call('EXISTS', taskKey) == 0 then
  redis.call('ZREM', deadlinesKey, member)
  return { UNKNOWN_TASK, '{}' }
end
local rec = decode_step(redis.call('HGET', taskKey, 's:' .. stepName))
local taskStatus = redis.call('HGET', taskKey, 'status')
local noop = { action = 'noop' }
local compensating = taskStatus == 'compensating' and rec and rec.status == 'compensating'
if not compensating and (not rec or taskStatus ~= 'running' or (rec.status ~= 'processing' and rec.status ~= 'parked')) then
  redis.call('ZREM', deadlinesKey, member)
  return { OK, cjson.encode(noop) }
end

local plan = cjson.decode(redis.call('HGET', taskKey, 'plan'))
local spec = find_spec(plan, stepName)
local events, dispatch = {}, {}
redis.call('HSET', taskKey, 'updatedAt', now)

if compensating then
  local comp = rec.comp
  if comp.completeBy and comp.completeBy > now then
    redis.call('ZADD', deadlinesKey, comp.completeBy, member)
    return { OK, cjson.encode(noop) }
  end
  local r, lb, mf = spec.c.l[1], spec.c.l[2], spec.c.l[3]
  if not comp.parked then
    comp.failureCount = comp.failureCount + 1
    if not comp.error then comp.error = 'complete-by passed without a result (timed out, or the agent died)' end
  end
  local caction
  if comp.parked then caction = 'retry'
  elseif comp.failureCount >= mf then caction = 'error'
  elseif comp.failureCount <= r then caction = 'retry'
  else caction = 'park' end
  if caction == 'retry' then
    start_compensation_attempt(taskKey, deadlinesKey, taskId, spec, rec, now, dispatch, false)
    push_event(taskKey, events, 'step_retried', stepName, comp.attempt, comp.error)
    comp.error = nil
  elseif caction == 'park' then
    comp.parked = true
    comp.completeBy = now + lb
    redis.call('ZADD', deadlinesKey, comp.completeBy, member)
    push_event(taskKey, events, 'step_parked', stepName, comp.attempt, comp.error)
  else
    rec.status = 'compensation_failed'
    comp.finishedAt = now
    redis.call('ZREM', deadlinesKey, member)
    push_event(taskKey, events, 'step_error', stepName, comp.attempt, comp.error)
    finish_task(taskKey, finished, taskId, 'compensation_failed', now, events,
      'compensation of ' .. stepName .. ' failed ' .. comp.failureCount .. ' times: ' .. comp.error)
  end
  rec.comp = comp
  save_step(taskKey, stepName, rec)
  return { OK, cjson.encode({ action = caction, kind = 'compensate', events = events, dispatch = dispatch, attempt = comp.attempt,
    replyTo = redis.call('HGET', taskKey, 'replyTo'), failureCount = comp.failureCount, lastError = comp.error,
    onFailure = redis.call('HGET', taskKey, 'onFailure') }) }
end

if rec.completeBy and rec.completeBy > now then
  -- The deadline moved after the sweep read the index (a fresh attempt): keep the index right.
  redis.call('ZADD', deadlinesKey, rec.completeBy, member)
  return { OK, cjson.encode(noop) }
end

local retries, longBackoff, maxFailures = spec.l[1], spec.l[2], spec.l[3]
local action

if rec.status == 'processing' then
  rec.failureCount = rec.failureCount + 1
  if not rec.error then rec.error = 'complete-by passed without a result (timed out, or the agent died)' end
end

if rec.status == 'parked' then
  action = 'retry'
elseif rec.failureCount >= maxFailures then
  action = 'error'
elseif rec.failureCount <= retries then
  action = 'retry'
else
  action = 'park'
end

if action == 'retry' then
  rec.status = 'processing'
  rec.attempt = rec.attempt + 1
  rec.completeBy = now + spec.b
  rec.startedAt = now
  rec.lockedBy = nil
  redis.call('ZADD', deadlinesKey, rec.completeBy, member)
  push_event(taskKey, events, 'step_retried', stepName, rec.attempt, rec.error)
  rec.error = nil -- the new attempt starts clean; the event above keeps the last error
  dispatch[1] = { step = stepName, agent = spec.a, kind = 'run', attempt = rec.attempt, completeBy = rec.completeBy, needs = spec.nd }
elseif action == 'park' then
  rec.status = 'parked'
  rec.completeBy = now + longBackoff
  redis.call('ZADD', deadlinesKey, rec.completeBy, member)
  push_event(taskKey, events, 'step_parked', stepName, rec.attempt, rec.error)
else
  rec.status = 'error'
  rec.finishedAt = now
  redis.call('ZREM', deadlinesKey, member)
  push_event(taskKey, events, 'step_error', stepName, rec.attempt, rec.error)
  local reason = 'step ' .. stepName .. ' failed ' .. rec.failureCount .. ' times: ' .. rec.error
  save_step(taskKey, stepName, rec)
  if redis.call('HGET', taskKey, 'onFailure') == 'compensate' then
    action = 'compensate'
    begin_undo(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch, 'compensated', reason)
  else
    finish_task(taskKey, finished, taskId, 'failed', now, events, reason)
  end
end
save_step(taskKey, stepName, rec)

return { OK, cjson.encode({ action = action, kind = 'run', events = events, dispatch = dispatch, attempt = rec.attempt,
  replyTo = redis.call('HGET', taskKey, 'replyTo'), failureCount = rec.failureCount, lastError = rec.error,
  onFailure = redis.call('HGET', taskKey, 'onFailure') }) }
