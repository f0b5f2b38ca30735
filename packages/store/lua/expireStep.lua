--[[
  expireStep — the supervisor's transition for one step whose completeBy has passed. Fenced by the
  supervisor leader epoch: a deposed leader's write is rejected (STALE_EPOCH) and changes nothing.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] the bucket's epoch fence   KEYS[4] finished index
  KEYS[5] compaction index   KEYS[6] open alerts (hash)   KEYS[7] alert outbox (zset)
  KEYS[8] the bucket's search index (decision 0021)
  ARGV[1] taskId  ARGV[2] step  ARGV[3] now  ARGV[4] epoch
  ARGV[5] the limited table (JSON, '' = none; decision 0020 §1.9): a retry (or a park's end, or the undo's
  next compensation) of a limited agent type queues instead of starting; its queue item is in the
  reply's `limiter`, which the supervisor sends as a queue_step command

  The phase that expired — the step's run (task running), or its compensation (task compensating) —
  climbs its ladder from the task's plan (decision 0009):
    running attempt expired → failureCount+1 (an attempt that reported nothing leaves the run's effect
                              unknown: an agent may have run it, decision 0010), then: give up at maxFailures or past the
                              give-up time; retry while failureCount <= retries; else park for the long
                              back-off (or give up, if the park could not end before the give-up time)
    park ended              → retry (the failure was counted when it parked), or give up past the give-up time
  Giving up: a run → step error, then the task's onFailure (failed + alert, or the undo begins); a
  compensation → task compensation_failed + alert. Alerts are recorded here (the outbox), never by a caller.
  A run step still in flight when its task began to be undone (a drain) → abandoned (effect unknown),
  and the undo goes on.
  A step waiting for a signal past its timeout (decision 0019 R9) → error, and the task's onFailure
  (failed with an alert `<task>:<step>:step_error:wait-<n>`, or the undo) → action 'error' | 'compensate'.
  A sleeping step whose wake time has come (decision 0019 R5) → processed; the steps it made ready
  start (their requests are the reply's dispatch: the supervisor asks a scheduler to send them, as for a
  retry), and the task completes when every step is done → action 'wake'.
  A fan-out element (ARGV[2] = `<step>#<i>`, decision 0019 R13, U4, U6): its run or compensation phase
  climbs the same ladder; an element that gives up gives its step up; one in flight when the undo began
  is abandoned and its step settles once none is left.
  A phase waiting for a limit (queued, decision 0020 Q7) at its check → not a failure: the check count
  grows, the member moves to now + min(10 s · 2^(check−1), 5 min), and its queue item is returned again
  (a ticket lost between the transition and the limiter is re-sent) → action 'requeue'.
  A child step's check (decision 0019 §5.3): its current operation on the child (start, cancel, undo) is
  dispatched again → action 'resend'; past a declared timeoutMs its child is cancelled → action 'timeout'.
  Anything else (task finished, step done, deadline moved) → action 'noop', nothing written but the index
  entry, which is dropped or moved to the live deadline.
  Returns { OK, json{action, kind, events, dispatch, replyTo, client, failureCount, lastError, attempt, workflow, createdAt} }
          | { STALE_EPOCH, json{epoch} } | { UNKNOWN_TASK, '{}' } (index entry removed)
  action: retry | park | error | compensate | abandon | wake | resend | timeout | noop
]]
--@include _common

local taskKey, deadlinesKey, epochKey = KEYS[1], KEYS[2], KEYS[3]
local taskId, stepName, epoch = ARGV[1], ARGV[2], tonumber(ARGV[4])
local member = deadline_member(taskId, stepName)

local refused = supervisor_guard(taskKey, deadlinesKey, epochKey, epoch, member)
if refused then return refused end
local base, item = element_of(stepName)
local rec = decode_step(redis.call('HGET', taskKey, 's:' .. stepName))
if rec and rec.fe then
  -- A fan-out step has no member of its own (its elements do): nothing to expire.
  redis.call('ZREM', deadlinesKey, member)
  return { OK, cjson.encode({ action = 'noop' }) }
end
local taskStatus = redis.call('HGET', taskKey, 'status')
local noop = cjson.encode({ action = 'noop' })

local function reply_with(ctx, action, kind, ph)
  flush(ctx)
  sync_search_read(ctx)
  return { OK, cjson.encode({ action = action, admit = ctx.admit, kind = kind, events = ctx.events, dispatch = ctx.dispatch, limiter = ctx.limiter, attempt = ph and ph.attempt,
    replyTo = redis.call('HGET', taskKey, 'replyTo'), client = redis.call('HGET', taskKey, 'client'), failureCount = ph and ph.failureCount, lastError = ph and ph.error,
    workflow = redis.call('HGET', taskKey, 'workflow'), createdAt = tonumber(redis.call('HGET', taskKey, 'createdAt')) }) }
end

local now = tonumber(ARGV[3])

-- A member read before its time moved (a fresh attempt, a sleep or wait indexed anew): the index is
-- kept right and nothing else is written. Returns the reply to end with, or nil when `at` has come.
local function not_due(at)
  if at and at > now then
    redis.call('ZADD', deadlinesKey, at, member)
    return { OK, noop }
  end
  return nil
end

-- The transition's working set, at the caller's time (never before the task's last transition).
-- The spec and record the deadline member names, read in `ctx`: a fan-out element's (`<step>#<i>`) or
-- the step's own.
local function member_of(ctx)
  if base then
    local s = spec_of(ctx, base)
    return element_spec(ctx, s, item), element_rec(ctx, s, item)
  end
  return spec_of(ctx, stepName), recs_of(ctx)[stepName]
end

local function open_ctx()
  local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, now))
  ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
  set_limited(ctx, ARGV[5])
  redis.call('HSET', taskKey, 'updatedAt', ctx.now)
  return ctx
end

-- Q7: a phase waiting for a limit, at its check (not a failure; nothing but the phase's check changes).
do
  local qkind, qph
  if rec and taskStatus == 'running' and rec.status == 'queued' and rec.q then qkind, qph = 'run', rec
  elseif rec and taskStatus == 'compensating' and rec.status == 'compensating' and rec.comp and rec.comp.queued and rec.comp.q then qkind, qph = 'compensate', rec.comp end
  if qph then
    local early = not_due(qph.q.at)
    if early then return early end
    local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, now))
    local spec
    spec, rec = member_of(ctx)
    local ph = phase(rec, qkind)
    local q = ph.q
    q.check = (q.check or 1) + 1
    q.at = ctx.now + math.min(QUEUE_CHECK_MS * 2 ^ (q.check - 1), QUEUE_CHECK_MAX_MS)
    redis.call('ZADD', deadlinesKey, q.at, member)
    limiter_add(ctx, q.a, 'queue', queue_item(ctx, spec, ph))
    touch(ctx, stepName)
    return reply_with(ctx, 'requeue', qkind, ph)
  end
end

-- A child step's check (decision 0019 R16, R17, U3′): while no notice has come, its current operation
-- is sent again (a lost start, cancel or undo is never simply forgotten); a declared timeout that passed
-- cancels the child (the step then ends `error` when its notice arrives).
if rec and rec.child and not rec.child.ended and ((taskStatus == 'running' and rec.status == 'waiting')
    or (taskStatus == 'compensating' and (rec.status == 'waiting' or rec.status == 'compensating'))
    or (taskStatus == 'failed' and rec.status == 'abandoned')) then
  local c = rec.child
  local timesOut = c.op == 'start' and c.timeoutAt and not c.timedOut
  local due = c.next
  if timesOut and c.timeoutAt < due then due = c.timeoutAt end
  local early = not_due(due)
  if early then return early end
  local ctx = open_ctx()
  local spec = spec_of(ctx, stepName)
  rec = recs_of(ctx)[stepName]
  c = rec.child
  local kind = rec.status == 'compensating' and 'compensate' or 'run'
  local ph = phase(rec, kind)
  if timesOut and c.timeoutAt <= now then
    c.op, c.timedOut = 'cancel', true
    push_event(ctx, 'step_failed', stepName, rec.attempt, 'child task ' .. c.id .. ' did not end within ' .. spec.ch.t .. ' ms: cancelling it')
    child_check(ctx, spec, rec, CHILD_FIRST_CHECK_MS)
    child_dispatch(ctx, spec, rec, kind)
    return reply_with(ctx, 'timeout', kind, ph)
  end
  child_check(ctx, spec, rec, CHILD_CHECK_MS)
  child_dispatch(ctx, spec, rec, kind)
  return reply_with(ctx, 'resend', kind, ph)
end

if rec and taskStatus == 'running' and rec.status == 'sleeping' then
  local early = not_due(rec.wakeAt)
  if early then return early end
  local ctx = open_ctx()
  redis.call('ZREM', deadlinesKey, member)
  complete_without_agent(ctx, spec_of(ctx, stepName), recs_of(ctx)[stepName])
  if start_ready(ctx) then finish_task(ctx, 'completed') end
  return reply_with(ctx, 'wake', 'run', nil)
end

if rec and taskStatus == 'running' and rec.status == 'waiting' then
  -- A wait for a signal that timed out (R9): the step gives up and the task's onFailure applies.
  local early = not_due(rec.timeoutAt)
  if early then return early end
  local ctx = open_ctx()
  local spec = spec_of(ctx, stepName)
  rec = recs_of(ctx)[stepName]
  rec.timeoutAt = nil
  local why = 'timed out after ' .. spec.ws.t .. ' ms waiting for signal ' .. spec.ws.s
  -- Each wait is its own alert (a retried wait that times out again raises a new one).
  local action = give_up(ctx, spec, rec, 'run', why, why, false, 'wait-' .. (rec.waits or 1))
  return reply_with(ctx, action == 'compensate' and 'compensate' or 'error', 'run', nil)
end

local kind, drain
if rec and taskStatus == 'running' and (rec.status == 'processing' or rec.status == 'parked') then
  kind = 'run'
elseif rec and taskStatus == 'compensating' and rec.status == 'processing' then
  kind, drain = 'run', true
elseif rec and taskStatus == 'compensating' and rec.status == 'compensating' then
  kind = 'compensate'
else
  redis.call('ZREM', deadlinesKey, member)
  return { OK, noop }
end
local ph = kind == 'compensate' and rec.comp or rec
local early = not_due(ph.completeBy)
if early then return early end

local ctx = open_ctx()
local spec
spec, rec = member_of(ctx)
ph = phase(rec, kind)
touch(ctx, stepName)

local NO_RESULT = 'complete-by passed without a result (timed out, or the agent died)'
local action
if drain then
  if not ph.reported then note_effect(rec, 'unknown') end
  abandon(ctx, spec, rec, (ph.reported and ph.error or NO_RESULT) .. ' (while the task was being undone)')
  action = 'abandon'
elseif is_parked(rec, kind) then
  if ph.giveUpAt and ctx.now >= ph.giveUpAt then
    action = give_up(ctx, spec, rec, kind, 'gave up at its give-up time after ' .. ph.failureCount .. ' failures: ' .. (ph.error or 'parked'), ph.error or 'parked', false)
  else
    if not maybe_queue(ctx, spec, rec, kind, 'step_retried', ph.error) then
      start_attempt(ctx, spec, rec, kind)
      push_event(ctx, 'step_retried', stepName, ph.attempt, ph.error)
      ph.error = nil
    end
    action = 'retry'
  end
else
  ph.failureCount = ph.failureCount + 1
  if not ph.reported then
    ph.error = NO_RESULT
    -- No result: an agent may have run the attempt and its call reached the service.
    if kind == 'run' then note_effect(rec, 'unknown') end
  end
  action = ladder_after_failure(ctx, spec, rec, kind)
end

return reply_with(ctx, action, kind, ph)
