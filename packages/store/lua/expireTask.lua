--[[
  expireTask — the supervisor's transition for a task whose own deadline (`deadlineMs` of its workflow)
  has passed (decision 0009). Fenced by the supervisor leader epoch like expireStep.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] the bucket's epoch fence   KEYS[4] finished index
  KEYS[5] compaction index   KEYS[6] open alerts (hash)   KEYS[7] alert outbox (zset)
  KEYS[8] the bucket's search index (decision 0021)
  ARGV[1] taskId  ARGV[2] now  ARGV[3] epoch
  ARGV[4] the limited table (JSON, '' = none; decision 0020): the undo's first compensation may queue; queued
  steps are abandoned and their tickets listed in the reply's `limiter` (dequeue)

  A task still running at its deadline is stopped as if its running step had given up: with
  onFailure=compensate the undo begins (steps in flight are waited for, then every step that may have
  taken effect is compensated); otherwise the steps in flight or parked are abandoned and the task fails
  with an alert of kind task_deadline. Any other status, or a deadline not yet reached → noop (the index
  entry dropped, or moved to the recorded deadline).
  Returns { OK, json{action, kind, events, dispatch, replyTo, client, workflow, createdAt} } | { STALE_EPOCH, json{epoch} } | { UNKNOWN_TASK, '{}' }
  action: compensate | error | noop
]]
--@include _common

local taskKey, deadlinesKey, epochKey = KEYS[1], KEYS[2], KEYS[3]
local taskId, epoch = ARGV[1], tonumber(ARGV[3])
local member = deadline_member(taskId, TASK_DEADLINE)

local refused = supervisor_guard(taskKey, deadlinesKey, epochKey, epoch, member)
if refused then return refused end
local noop = cjson.encode({ action = 'noop' })
local deadlineAt = tonumber(redis.call('HGET', taskKey, 'deadlineAt'))
if redis.call('HGET', taskKey, 'status') ~= 'running' or not deadlineAt then
  redis.call('ZREM', deadlinesKey, member)
  return { OK, noop }
end
local now = tonumber(ARGV[2])
if deadlineAt > now then
  redis.call('ZADD', deadlinesKey, deadlineAt, member)
  return { OK, noop }
end

local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, now))
ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
set_limited(ctx, ARGV[4])
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
local reason = 'the task deadline passed (' .. (deadlineAt - tonumber(redis.call('HGET', taskKey, 'createdAt'))) .. ' ms after it was accepted)'
local action
if redis.call('HGET', taskKey, 'onFailure') == 'compensate' then
  begin_undo(ctx, 'compensated', reason)
  action = 'compensate'
else
  abandon_in_flight(ctx, reason)
  finish_task(ctx, 'failed', reason)
  record_alert(ctx, 'task_deadline', nil, 0, reason)
  action = 'error'
end
flush(ctx)
sync_search_read(ctx)
return { OK, cjson.encode({ action = action, admit = ctx.admit, kind = 'run', events = ctx.events, dispatch = ctx.dispatch, limiter = ctx.limiter, replyTo = redis.call('HGET', taskKey, 'replyTo'), client = redis.call('HGET', taskKey, 'client'),
  workflow = redis.call('HGET', taskKey, 'workflow'), createdAt = tonumber(redis.call('HGET', taskKey, 'createdAt')) }) }
