--[[
  retryStep — an operator resubmits a step that failed for good (status failed or error), or one parked
  for a long back-off, optionally with a corrected task input. The step starts again at once with a new
  attempt and a fresh failure budget; the task is running again; the step's open alerts are closed.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] open alerts (hash)
  KEYS[5] the scheduler's task lease   KEYS[6] compaction index
  ARGV[1] taskId  ARGV[2] step ('' = the task's failed step)  ARGV[3] new input (msgpack, '' = keep)
  ARGV[4] now  ARGV[5] schedulerId  ARGV[6] the lease token  ARGV[7] the lease duration (ms)

  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status, step}, input, needs... }
          | { UNKNOWN_TASK, '{}' } | { UNKNOWN_STEP, '{}' } | { INVALID_STATE, json{reason} } | { LEASE_BUSY, '{}' }
  Events: step_retried (reason "operator retry").
]]
--@include _common

local taskKey, deadlinesKey, alertsKey = KEYS[1], KEYS[2], KEYS[4]
local finished = { zset = KEYS[3], compact = KEYS[6] }
local taskId, stepName, now = ARGV[1], ARGV[2], tonumber(ARGV[4])

if not take_lease(KEYS[5], ARGV[6], ARGV[7], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
now = task_now(taskKey, now)
local taskStatus = redis.call('HGET', taskKey, 'status')
if taskStatus ~= 'running' and taskStatus ~= 'failed' and taskStatus ~= 'compensation_failed' then
  return { INVALID_STATE, cjson.encode({ reason = 'the task is ' .. taskStatus .. '; only a failed, compensation_failed or running task has a step to retry' }) }
end
local plan = cjson.decode(redis.call('HGET', taskKey, 'plan'))
local spec, rec
for _, s in ipairs(plan) do
  local r = decode_step(redis.call('HGET', taskKey, 's:' .. s.n))
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

-- What may be retried: a failed compensation of a task that failed while compensating, or a failed,
-- errored or parked step of a task that failed or is still running.
local compensation = rec.status == 'compensation_failed' and taskStatus == 'compensation_failed'
if not compensation then
  if taskStatus == 'compensation_failed' then
    return { INVALID_STATE, cjson.encode({ reason = 'the task failed while compensating; retry its failed compensation step' }) }
  end
  if rec.status ~= 'failed' and rec.status ~= 'error' and rec.status ~= 'parked' then
    return { INVALID_STATE, cjson.encode({ reason = 'step ' .. spec.n .. ' is ' .. rec.status .. '; only a failed, error or parked step can be retried' }) }
  end
end

if ARGV[3] ~= '' then redis.call('HSET', taskKey, 'input', ARGV[3]) end
local lockEpoch = take_lock(taskKey, ARGV[5])
local events, dispatch = {}, {}
local newStatus

if compensation then
  -- Resubmit the failed compensation; the undo then goes on in reverse order of completion.
  local comp = start_compensation_attempt(taskKey, deadlinesKey, taskId, spec, rec, now, dispatch, true)
  comp.error = nil
  newStatus = 'compensating'
  push_event(taskKey, events, 'step_retried', spec.n, comp.attempt, 'operator retry of the compensation', newStatus)
else
  rec.status = 'processing'
  rec.attempt = rec.attempt + 1
  rec.failureCount = 0
  rec.completeBy = now + spec.b
  rec.startedAt = now
  rec.finishedAt = nil
  rec.error = nil
  rec.lockedBy = nil
  newStatus = 'running'
  redis.call('ZADD', deadlinesKey, rec.completeBy, deadline_member(taskId, spec.n))
  push_event(taskKey, events, 'step_retried', spec.n, rec.attempt, 'operator retry', newStatus)
  dispatch[1] = { step = spec.n, agent = spec.a, kind = 'run', attempt = rec.attempt, completeBy = rec.completeBy, needs = spec.nd }
end
save_step(taskKey, spec.n, rec)
if taskStatus ~= newStatus then
  redis.call('HSET', taskKey, 'status', newStatus)
  redis.call('HDEL', taskKey, 'finishedAt')
  if not compensation then redis.call('HDEL', taskKey, 'error') end
  redis.call('ZREM', finished.zset, taskId)
end
redis.call('HSET', taskKey, 'updatedAt', now)
-- Close the step's open alerts (their ids start with "<taskId>:<step>:").
local prefix = taskId .. ':' .. spec.n .. ':'
for _, field in ipairs(redis.call('HKEYS', alertsKey)) do
  if string.sub(field, 1, #prefix) == prefix then redis.call('HDEL', alertsKey, field) end
end
return reply(OK, taskKey, { lockEpoch = lockEpoch, replyTo = redis.call('HGET', taskKey, 'replyTo'), events = events,
  dispatch = dispatch, status = newStatus, step = spec.n }, dispatch)
