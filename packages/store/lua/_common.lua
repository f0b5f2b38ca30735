-- Shared fragment, inlined by the loader wherever a script says --@include _common.
--@include _msgpack
--@include _when
-- Return codes (mirrored by ScriptCode in src/codes.ts).
local OK, EXISTS, UNKNOWN_TASK, STALE, INVALID_STATE, VERSION_CONFLICT, UNKNOWN_STEP, STALE_EPOCH, LEASE_BUSY, FORGED, BUFFER_FULL = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
-- A bulk operation already acted on this task (decision 0021 §2.3; 11 is left to decision 0019).
local ALREADY_APPLIED = 12

-- The fence of a bulk operation, checked atomically with its act (decision 0021 §2.3): the operation's id
-- in the task's `bo` (its last 16 operations) → ALREADY_APPLIED; created after the operation's snapshot,
-- or no longer in the status it acts on → INVALID_STATE with the reason. Returns the refusal, or nil and
-- the ids to record with op_record once the act is done. Nothing is read when `opId` is ''.
local function op_fence(taskKey, opId, expectStatus, createdBefore)
  if not opId or opId == '' then return nil, nil end
  local f = redis.call('HMGET', taskKey, 'bo', 'status', 'createdAt')
  local bo = f[1] and cjson.decode(f[1]) or {}
  for _, x in ipairs(bo) do
    if x == opId then return { ALREADY_APPLIED, cjson.encode({ reason = 'operation ' .. opId .. ' already acted on this task' }) }, nil end
  end
  if tonumber(f[3]) > tonumber(createdBefore) then
    return { INVALID_STATE, cjson.encode({ reason = 'created after the operation started' }) }, nil
  end
  if f[2] ~= expectStatus then
    return { INVALID_STATE, cjson.encode({ reason = 'status is now ' .. tostring(f[2]) }) }, nil
  end
  bo[#bo + 1] = opId
  while #bo > 16 do table.remove(bo, 1) end
  return nil, bo
end

local function op_record(taskKey, bo)
  if bo then redis.call('HSET', taskKey, 'bo', cjson.encode(bo)) end
end

-- The caller's lease, taken in the same atomic call as the write it guards (decision 0006): free, or
-- already held with the caller's token → (re)set to the token for `ms`; held by anyone else → false,
-- and the caller writes nothing. This is Redlock's single-instance acquire (SET NX PX with a unique
-- token), so Redlock's extend and release work on it unchanged. Tokens are `<owner>.<n>`: with
-- `supersedeOwn`, a lease its own process still holds (an earlier operation whose release has not gone
-- out yet; one process runs a task's operations one after the other) is taken over too.
local function take_lease(leaseKey, token, ms, supersedeOwn)
  local holder = redis.call('GET', leaseKey)
  if holder and holder ~= token then
    local owner = supersedeOwn and string.match(token, '^(.*%.)') or nil
    if not owner or string.sub(holder, 1, #owner) ~= owner then return false end
  end
  redis.call('SET', leaseKey, token, 'PX', ms)
  return true
end

-- The time a transition records: the caller's clock, but never before the task's last transition. A
-- caller reads its clock before its script takes the task's lease, so without this a scheduler delayed
-- between the two (or with a slower clock) could record a step starting before its dependency finished.
local function task_now(taskKey, now)
  local last = tonumber(redis.call('HGET', taskKey, 'updatedAt'))
  if last and last > now then return last end
  return now
end

-- The supervisors' fence (decisions 0004, 0015): `epochKey` is the bucket's fence, the highest epoch it
-- has seen. Returns that epoch when the caller's `epoch` is older (a newer leader exists: the caller
-- writes nothing), else raises the fence to the caller's epoch and returns nil.
local function newer_epoch(epochKey, epoch)
  local current = tonumber(redis.call('GET', epochKey) or '0')
  epoch = tonumber(epoch)
  if epoch < current then return current end
  if epoch > current then redis.call('SET', epochKey, epoch) end
  return nil
end

-- The opening of the supervisor's per-deadline transitions: refused at a stale epoch; a deadline whose
-- task is gone (removed by retention) drops its index entry. Returns the reply to end with, or nil.
local function supervisor_guard(taskKey, deadlinesKey, epochKey, epoch, member)
  local current = newer_epoch(epochKey, epoch)
  if current then return { STALE_EPOCH, cjson.encode({ epoch = current }) } end
  if redis.call('EXISTS', taskKey) == 0 then
    redis.call('ZREM', deadlinesKey, member)
    return { UNKNOWN_TASK, '{}' }
  end
  return nil
end

local function decode_step(raw)
  if not raw then return nil end
  return cjson.decode(raw)
end

-- Every step record of the plan, by step name, in one HMGET (not one HGET per step: a transition of a
-- long workflow would otherwise make as many calls as the workflow has steps).
local function load_steps(taskKey, plan)
  local fields = {}
  for i, s in ipairs(plan) do fields[i] = 's:' .. s.n end
  local raw = redis.call('HMGET', taskKey, unpack(fields))
  local recs = {}
  for i, s in ipairs(plan) do recs[s.n] = decode_step(raw[i]) end
  return recs
end

local function deadline_member(taskId, name)
  return taskId .. '|' .. name
end

-- The deadline index member of a task's own deadline (`#` cannot occur in a step name).
local TASK_DEADLINE = '#task'

-- A transition's working set (decision 0009): the task's keys, the clock, the events and dispatches it
-- produces, and the step records, read once and written back once by `flush`, so helpers that change
-- several steps never overwrite each other's writes.
local function new_ctx(taskKey, deadlinesKey, finished, taskId, now)
  return { taskKey = taskKey, deadlinesKey = deadlinesKey, finished = finished, taskId = taskId, now = now,
    events = {}, dispatch = {}, dirty = {}, dirtyCount = 0 }
end

local function plan_of(ctx)
  if not ctx.plan then ctx.plan = cjson.decode(redis.call('HGET', ctx.taskKey, 'plan')) end
  return ctx.plan
end

local function recs_of(ctx)
  if not ctx.recs then ctx.recs = load_steps(ctx.taskKey, plan_of(ctx)) end
  return ctx.recs
end

local function spec_of(ctx, name)
  for _, s in ipairs(plan_of(ctx)) do if s.n == name then return s end end
  return nil
end

local function touch(ctx, name)
  if not ctx.dirty[name] then
    ctx.dirty[name] = true
    ctx.dirtyCount = ctx.dirtyCount + 1
  end
end

-- Writes every changed step record in one HSET.
local function flush(ctx)
  if ctx.dirtyCount == 0 then return end
  local args = {}
  for name in pairs(ctx.dirty) do
    args[#args + 1] = 's:' .. name
    args[#args + 1] = cjson.encode(ctx.recs[name])
  end
  redis.call('HSET', ctx.taskKey, unpack(args))
  ctx.dirty, ctx.dirtyCount = {}, 0
end

-- Appends an event; the per-task sequence number is assigned here, atomically with the transition.
-- `untilTs`: what a waiting step waits until (epoch ms); `signal`: the signal's name (decision 0019).
local function push_event(ctx, etype, step, attempt, reason, status, untilTs, signal)
  local seq = redis.call('HINCRBY', ctx.taskKey, 'seq', 1)
  ctx.events[#ctx.events + 1] = { type = etype, seq = seq, step = step, attempt = attempt, reason = reason, status = status, ['until'] = untilTs, signal = signal }
end

-- Takes the task for this scheduler; the lock epoch grows on every hand-over between schedulers.
local function take_lock(taskKey, schedulerId)
  local owner = redis.call('HGET', taskKey, 'lockedBy')
  if owner ~= schedulerId then
    redis.call('HSET', taskKey, 'lockedBy', schedulerId)
    return redis.call('HINCRBY', taskKey, 'lockEpoch', 1)
  end
  return tonumber(redis.call('HGET', taskKey, 'lockEpoch'))
end

-- An operator alert, recorded by the transition that makes it necessary (decision 0009): in the open
-- alerts (closed by a retry of the task) and in the outbox the leader supervisor publishes from. Its id,
-- `<taskId>:<step>:<kind>:<attempt>`, is unique per give-up (a retried step that fails again is a new
-- alert, never dropped as a repeat). Needs ctx.alertsKey and ctx.outboxKey (the calling script's KEYS).
local function record_alert(ctx, kind, step, failureCount, lastError, attempt)
  local alert = { id = ctx.taskId .. ':' .. (step or TASK_DEADLINE) .. ':' .. kind .. ':' .. (attempt or 0), kind = kind, taskId = ctx.taskId,
    step = step, failureCount = failureCount, raisedAt = ctx.now }
  if lastError then alert.lastError = string.sub(lastError, 1, 4000) end
  local json = cjson.encode(alert)
  redis.call('HSET', ctx.alertsKey, alert.id, json)
  redis.call('ZADD', ctx.outboxKey, ctx.now, json)
end

---------------------------------------------------------------------------------------------------
-- The search index (decision 0021 §1.2): one lexicographic sorted set per bucket (`ctx.finished.search`),
-- members `<kind>\31<value>\31<createdAt, 13 digits>\31<taskId>` of score 0, kinds t (tag `k=v`),
-- s (status), w (workflow), c (client). Only a task that carries tags is indexed: an untagged task costs
-- nothing more (its queries walk the tasks index, task-store.ts). A transition that changes a task's
-- status says so with note_status; the members follow once, at its end (sync_search), where the reply
-- already reads the task's fields: no Redis call more for an untagged task.
---------------------------------------------------------------------------------------------------
local SEARCH_SEP = '\31'
local SEARCH_STATUSES = { 'running', 'completed', 'failed', 'compensating', 'compensated', 'compensation_failed', 'cancelled' }

local function search_member(kind, value, createdAt, taskId)
  return kind .. SEARCH_SEP .. value .. SEARCH_SEP .. string.format('%013d', tonumber(createdAt)) .. SEARCH_SEP .. taskId
end

-- Every member of a task: its tags (decoded JSON), status, workflow and client.
local function search_members(tags, status, workflow, client, createdAt, taskId)
  local out = {}
  for k, v in pairs(tags) do out[#out + 1] = search_member('t', k .. '=' .. v, createdAt, taskId) end
  out[#out + 1] = search_member('s', status, createdAt, taskId)
  out[#out + 1] = search_member('w', workflow, createdAt, taskId)
  out[#out + 1] = search_member('c', client, createdAt, taskId)
  return out
end

-- The status members of every status but `keep` (all of them when nil): removed in one ZREM.
local function other_status_members(keep, createdAt, taskId)
  local out = {}
  for _, st in ipairs(SEARCH_STATUSES) do
    if st ~= keep then out[#out + 1] = search_member('s', st, createdAt, taskId) end
  end
  return out
end

-- ZADD's arguments for members of score 0.
local function zadd_args(members)
  local a = {}
  for _, m in ipairs(members) do a[#a + 1] = 0; a[#a + 1] = m end
  return a
end

-- Every member a task may have in the search index (all seven statuses: a stale one is removed too).
local function all_search_members(tagsJson, workflow, client, createdAt, taskId)
  local out = other_status_members(nil, createdAt, taskId)
  for k, v in pairs(cjson.decode(tagsJson)) do out[#out + 1] = search_member('t', k .. '=' .. v, createdAt, taskId) end
  out[#out + 1] = search_member('w', workflow, createdAt, taskId)
  out[#out + 1] = search_member('c', client, createdAt, taskId)
  return out
end

local function note_status(ctx, status)
  ctx.newStatus = status
end

-- Moves a tagged task's status member to the status the transition left it in. `tagsJson`, `createdAt`:
-- the task's fields (read by the caller with what it reads anyway).
local function sync_search(ctx, tagsJson, createdAt)
  if not ctx.newStatus then return end
  local status = ctx.newStatus
  ctx.newStatus = nil
  if not tagsJson or tagsJson == '' then return end
  local searchKey = ctx.finished and ctx.finished.search
  if not searchKey then error('a transition changed the status of tagged task ' .. ctx.taskId .. ' without the search index in its KEYS') end
  redis.call('ZREM', searchKey, unpack(other_status_members(status, createdAt, ctx.taskId)))
  redis.call('ZADD', searchKey, 0, search_member('s', status, createdAt, ctx.taskId))
end

-- sync_search for a transition that does not end with reply(): reads the two fields only when the status changed.
local function sync_search_read(ctx)
  if not ctx.newStatus then return end
  local v = redis.call('HMGET', ctx.taskKey, 'tags', 'createdAt')
  sync_search(ctx, v[1], v[2])
end

-- Marks the task finished and files it for retention: in the finished index, and, when it can never
-- be retried (completed, compensated, cancelled; `retryStep` takes only failed and compensation_failed
-- ones), in the compaction index that retention reads in O(due) (compactFinished.lua, decision 0007).
-- Its own deadline, if it had one, no longer applies.
local function finish_task(ctx, status, reason)
  local now = ctx.now
  redis.call('HSET', ctx.taskKey, 'status', status, 'finishedAt', now, 'updatedAt', now)
  note_status(ctx, status)
  if reason then redis.call('HSET', ctx.taskKey, 'error', reason) end
  redis.call('ZADD', ctx.finished.zset, now, ctx.taskId)
  if status == 'completed' or status == 'compensated' or status == 'cancelled' then
    redis.call('ZADD', ctx.finished.compact, now, ctx.taskId)
  end
  redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, TASK_DEADLINE))
  push_event(ctx, status, nil, nil, reason, status)
end

---------------------------------------------------------------------------------------------------
-- Phases (decision 0009): a step's run and its compensation climb the same bounded ladder. The run
-- phase is the step record itself; the compensation phase is its `comp` table. `sp` is the plan's
-- phase spec: { a = agent, b = budget, l = { retries, longBackoffMs, maxFailures, maxCircuitOpen }, g = giveUpAfterMs }.
---------------------------------------------------------------------------------------------------

local function phase(rec, kind)
  if kind == 'compensate' then
    if not rec.comp then rec.comp = { attempt = 0, failureCount = 0 } end
    return rec.comp
  end
  return rec
end

local function phase_spec(spec, kind)
  if kind == 'compensate' then return spec.c end
  return spec
end

local function is_parked(rec, kind)
  if kind == 'compensate' then return rec.comp ~= nil and rec.comp.parked == true end
  return rec.status == 'parked'
end

-- What Triad knows of a run's remote effect only moves up: none → unknown → applied.
local EFFECT_RANK = { none = 0, unknown = 1, applied = 2 }
local function note_effect(rec, effect)
  if EFFECT_RANK[effect] > EFFECT_RANK[rec.effect or 'none'] then rec.effect = effect end
end

-- Starts a new attempt of a phase (a first start, a supervisor retry, an operator's resubmission):
-- new complete-by in the deadline index, the request for the caller to send. The give-up time is set
-- on the phase's first start (an operator's retry clears it first, for a fresh budget).
local function start_attempt(ctx, spec, rec, kind)
  local sp, ph = phase_spec(spec, kind), phase(rec, kind)
  local now = ctx.now
  ph.attempt = (ph.attempt or 0) + 1
  ph.completeBy = now + sp.b
  ph.startedAt = now
  ph.finishedAt = nil
  ph.lockedBy = nil
  ph.reported = nil
  if not ph.giveUpAt and sp.g then ph.giveUpAt = now + sp.g end
  local needs = spec.nd
  local dispatch = { step = spec.n, agent = sp.a, kind = kind, attempt = ph.attempt, completeBy = ph.completeBy }
  if kind == 'compensate' then
    ph.parked = nil
    rec.status = 'compensating'
    dispatch.effect = rec.effect or 'none'
    -- The compensation gets the step's own output, when it has one (an in-doubt step has none).
    if rec.effect == 'applied' then needs = { spec.n } else needs = {} end
  else
    rec.status = 'processing'
  end
  dispatch.needs = needs
  redis.call('ZADD', ctx.deadlinesKey, ph.completeBy, deadline_member(ctx.taskId, spec.n))
  ctx.dispatch[#ctx.dispatch + 1] = dispatch
  touch(ctx, spec.n)
  return ph
end

-- Parks a phase until `untilTs`: no attempt is in flight; the supervisor retries it then.
local function park(ctx, spec, rec, kind, untilTs, reason)
  local ph = phase(rec, kind)
  ph.completeBy = untilTs
  if kind == 'compensate' then ph.parked = true else rec.status = 'parked' end
  redis.call('ZADD', ctx.deadlinesKey, untilTs, deadline_member(ctx.taskId, spec.n))
  push_event(ctx, 'step_parked', spec.n, ph.attempt, reason)
  touch(ctx, spec.n)
end

-- The agent gave up inside its window with a retryable failure (or its breaker stayed open past the
-- limit): the attempt's deadline moves to now, so the supervisor's next sweep counts the failure.
local function report_retryable(ctx, spec, rec, kind, message)
  local ph = phase(rec, kind)
  ph.error = message
  ph.completeBy = ctx.now
  ph.reported = true
  redis.call('ZADD', ctx.deadlinesKey, ctx.now, deadline_member(ctx.taskId, spec.n))
  push_event(ctx, 'step_failed', spec.n, ph.attempt, message)
  touch(ctx, spec.n)
end

-- Completion order of processed steps, and the undo's order (decision 0009): processed steps by
-- completion time, in-doubt steps by their last start, an in-doubt step before a processed one at the
-- same millisecond, the completion counter between processed ones.
local function undo_key(rec)
  if rec.status == 'processed' then return rec.finishedAt or 0, 0, rec.order or 0 end
  return rec.startedAt or 0, 1, 0
end

local function undo_before(a, b)
  local at, ar, ao = undo_key(a)
  local bt, br, bo = undo_key(b)
  if at ~= bt then return at > bt end
  if ar ~= br then return ar > br end
  return ao > bo
end

-- Steps whose run may have taken effect and that say how to undo it.
local UNDOABLE = { processed = true, abandoned = true, failed = true, error = true }

-- Drives an undo one step further: while a step is in flight nothing starts (its result or its
-- complete-by comes first); then the compensation of the next step that may have taken effect
-- starts, or, when none is left, the task ends as `endAs` (compensated | cancelled).
local function next_compensation(ctx)
  local recs = recs_of(ctx)
  local best, bestRec = nil, nil
  for _, s in ipairs(plan_of(ctx)) do
    local rec = recs[s.n]
    if rec.status == 'processing' or rec.status == 'compensating' then return end
    if type(s.c) == 'table' and UNDOABLE[rec.status] and (rec.effect or 'none') ~= 'none' then
      if not best or undo_before(rec, bestRec) then best, bestRec = s, rec end
    end
  end
  if not best then
    finish_task(ctx, redis.call('HGET', ctx.taskKey, 'endAs') or 'compensated')
    return
  end
  local comp = start_attempt(ctx, best, bestRec, 'compensate')
  comp.error = nil
  push_event(ctx, 'compensation_started', best.n, comp.attempt)
end

-- Begins undoing a task: nothing new starts; a step in flight keeps its attempt and the undo waits for
-- it; a parked one is abandoned (no attempt is in flight); then every step that may have taken effect is
-- compensated, one at a time (decision 0009).
local function begin_undo(ctx, endAs, reason)
  redis.call('HSET', ctx.taskKey, 'status', 'compensating', 'endAs', endAs, 'updatedAt', ctx.now)
  note_status(ctx, 'compensating')
  if reason then redis.call('HSET', ctx.taskKey, 'error', reason) end
  redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, TASK_DEADLINE))
  local recs = recs_of(ctx)
  for _, s in ipairs(plan_of(ctx)) do
    local rec = recs[s.n]
    if rec.status == 'sleeping' or rec.status == 'waiting' then
      -- A sleep or a wait stops at once (decision 0019 U1): nothing ran, nothing to undo (effect none).
      local what = rec.status == 'sleeping' and 'stopped sleeping' or 'stopped waiting for signal ' .. s.ws.s
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, nil, what .. ': the task is being undone')
      touch(ctx, s.n)
    -- Parked, or reported failed with its retry not yet decided: no attempt of it is in flight.
    elseif rec.status == 'parked' or (rec.status == 'processing' and rec.reported) then
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, rec.attempt, 'not running when the task began to be undone' .. (rec.error and (': ' .. rec.error) or ''))
      touch(ctx, s.n)
    end
  end
  push_event(ctx, 'compensating', nil, nil, reason, 'compensating')
  next_compensation(ctx)
end

-- Ends a run step that was in flight when the undo began (a drain): it is abandoned with what is known
-- of its effect, and the undo goes on.
local function abandon(ctx, spec, rec, reason)
  rec.status = 'abandoned'
  rec.finishedAt = ctx.now
  rec.error = reason
  redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, spec.n))
  push_event(ctx, 'step_abandoned', spec.n, rec.attempt, reason)
  touch(ctx, spec.n)
  next_compensation(ctx)
end

-- A task that fails (onFailure=error) stops every other step: those in flight or parked are abandoned
-- (a late result is stale; an operator's retry of the task starts them again).
local function abandon_in_flight(ctx, reason)
  local recs = recs_of(ctx)
  for _, s in ipairs(plan_of(ctx)) do
    local rec = recs[s.n]
    if rec.status == 'processing' or rec.status == 'parked' or rec.status == 'sleeping' or rec.status == 'waiting' then
      if rec.status == 'processing' and not rec.reported then note_effect(rec, 'unknown') end
      local why = reason
      if rec.status == 'sleeping' then why = 'stopped sleeping: ' .. reason
      elseif rec.status == 'waiting' then why = 'stopped waiting for signal ' .. s.ws.s .. ': ' .. reason end
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, (rec.attempt or 0) > 0 and rec.attempt or nil, why)
      touch(ctx, s.n)
    end
  end
end

-- A phase gives up for good (its ladder is exhausted, its give-up time passed, or it failed
-- permanently). `why` completes "step <name> …" ("failed 3 times: …"); `lastError` is what the step
-- shows. A run: the step is `error` (`failed` when permanent) and the task follows its policy — undone
-- (onFailure=compensate), or failed with an alert. A compensation: the task ends compensation_failed
-- with an alert. Needs ctx.alertsKey/outboxKey. Returns the action taken. `alertAttempt` names the
-- give-up in the alert id when it is not the phase's attempt (a failure at a step's start).
local function give_up(ctx, spec, rec, kind, why, lastError, permanent, alertAttempt)
  local ph = phase(rec, kind)
  ph.finishedAt = ctx.now
  ph.error = lastError
  redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, spec.n))
  touch(ctx, spec.n)
  if kind == 'compensate' then
    ph.parked = nil
    rec.status = 'compensation_failed'
    push_event(ctx, permanent and 'step_failed' or 'step_error', spec.n, ph.attempt, lastError)
    finish_task(ctx, 'compensation_failed', 'compensation of ' .. spec.n .. ' ' .. why)
    record_alert(ctx, 'compensation_failed', spec.n, ph.failureCount, lastError, ph.attempt)
    return 'error'
  end
  rec.status = permanent and 'failed' or 'error'
  push_event(ctx, permanent and 'step_failed' or 'step_error', spec.n, ph.attempt, lastError)
  local reason = 'step ' .. spec.n .. ' ' .. why
  if redis.call('HGET', ctx.taskKey, 'onFailure') == 'compensate' then
    begin_undo(ctx, 'compensated', reason)
    return 'compensate'
  end
  abandon_in_flight(ctx, reason)
  finish_task(ctx, 'failed', reason)
  record_alert(ctx, permanent and 'step_failed' or 'step_error', spec.n, ph.failureCount, lastError, alertAttempt or ph.attempt)
  return 'error'
end

-- The ladder after a counted failure (decision 0009): give up at maxFailures or past the give-up time;
-- retry at once while failureCount <= retries; otherwise park for the long back-off — unless the park
-- could not end before the give-up time, which gives up now. Returns the action taken.
local function ladder_after_failure(ctx, spec, rec, kind)
  local sp, ph = phase_spec(spec, kind), phase(rec, kind)
  local retries, longBackoff, maxFailures = sp.l[1], sp.l[2], sp.l[3]
  local now = ctx.now
  local lastError = ph.error or 'failed'
  local n = ph.failureCount
  if n >= maxFailures then
    return give_up(ctx, spec, rec, kind, 'failed ' .. n .. ' times: ' .. lastError, lastError, false)
  end
  if ph.giveUpAt and now >= ph.giveUpAt then
    return give_up(ctx, spec, rec, kind, 'gave up at its give-up time after ' .. n .. ' failures: ' .. lastError, lastError, false)
  end
  if n <= retries then
    start_attempt(ctx, spec, rec, kind)
    push_event(ctx, 'step_retried', spec.n, ph.attempt, lastError)
    ph.error = nil -- the new attempt starts clean; the event above keeps the last error
    return 'retry'
  end
  if ph.giveUpAt and now + longBackoff >= ph.giveUpAt then
    return give_up(ctx, spec, rec, kind, 'gave up after ' .. n .. ' failures: no time for another attempt before its give-up time: ' .. lastError, lastError, false)
  end
  park(ctx, spec, rec, kind, now + longBackoff, lastError)
  return 'park'
end

-- A dependency is done when it is processed or skipped (decision 0019 §2.3: a skipped step's
-- dependents run; it has no output, so a step that needs it gets none).
local DEPENDENCY_DONE = { processed = true, skipped = true }

-- The task input's bytes for a condition (nil: the task has none), read once per transition.
local function task_input(ctx)
  if ctx.input == nil then
    local raw = redis.call('HGET', ctx.taskKey, 'input')
    ctx.input = (raw and raw ~= '') and raw or false
  end
  return ctx.input or nil
end

-- Evaluates a ready step's `when` (_when.lua): true, false and the reason, or nil and why the bytes
-- could not be read. A condition decides once, before the step's first attempt: a step that has run
-- (an operator's retry of it) runs again whatever its condition now says — an attempt of it may have
-- taken effect, and a skipped step is never compensated.
local function step_condition(ctx, spec, rec)
  if not spec.w or (rec.attempt or 0) > 0 then return true end
  return when_eval(spec.w, task_input(ctx), function(name)
    local out = redis.call('HGET', ctx.taskKey, 'o:' .. name)
    if not out or out == '' then return nil end
    return out
  end)
end

-- When a ready sleep step wakes (decision 0019 R2/R4): now + ms, or the epoch ms its input path holds.
-- Returns the time, or nil and why it cannot sleep (the step then fails for good).
local function sleep_until(ctx, spec)
  local sl = spec.sl
  if sl.ms then return ctx.now + sl.ms end
  local path = table.concat(sl.p, '.')
  local what = 'sleep.untilInput: input field ' .. path
  local input = task_input(ctx)
  if not input then return nil, what .. ' is absent: the task has no input (expected epoch ms)' end
  local pos, err = mp_locate(input, 1, sl.p)
  if pos == nil then return nil, 'the task input is not valid msgpack at ' .. path .. ' (' .. err .. ')' end
  if not pos then return nil, what .. ' is absent (expected epoch ms)' end
  local kind, v = mp_scalar(input, pos)
  if kind ~= 'int' and kind ~= 'float' then return nil, what .. ' is ' .. when_render(kind, v) .. ', not a number (expected epoch ms)' end
  if v ~= v or v < 0 or v == math.huge then return nil, what .. ' is ' .. when_number(v) .. ', not a time (expected epoch ms)' end
  if v > ctx.now + sl.mx then
    return nil, what .. ' is ' .. when_number(v) .. ', more than maxMs ' .. when_number(sl.mx) .. ' ms ahead (the step may sleep at most that long)'
  end
  return math.floor(v)
end

-- A step that needs no agent is done (a sleep that woke, a wait that got its signal): processed, in
-- completion order; `output` (msgpack; nil or '' = none) becomes its output.
local function complete_without_agent(ctx, spec, rec, output)
  rec.status = 'processed'
  rec.finishedAt = ctx.now
  rec.wakeAt = nil
  rec.timeoutAt = nil
  rec.order = redis.call('HINCRBY', ctx.taskKey, 'doneSeq', 1)
  if output and output ~= '' then redis.call('HSET', ctx.taskKey, 'o:' .. spec.n, output) end
  touch(ctx, spec.n)
  push_event(ctx, 'step_done', spec.n)
end

-- The task's buffered signals (decision 0019 §3.3): `sq`, a JSON list of { id, name, at, by } in arrival order.
local function signal_queue(ctx)
  local raw = redis.call('HGET', ctx.taskKey, 'sq')
  if not raw then return {} end
  return cjson.decode(raw)
end

-- A signal reaches the step that waits for it (R6 from the buffer, R8 live): its data is the step's
-- output, its dedup record names the step, and events say who sent it.
local function deliver_signal(ctx, spec, rec, id, by, data)
  local g = cjson.decode(redis.call('HGET', ctx.taskKey, 'g:' .. id) or '{}')
  g.to = spec.n
  redis.call('HSET', ctx.taskKey, 'g:' .. id, cjson.encode(g))
  rec.signalId = id
  redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, spec.n))
  push_event(ctx, 'signal_received', spec.n, nil, 'id ' .. id .. ' from ' .. by .. ' delivered to ' .. spec.n, nil, nil, spec.ws.s)
  complete_without_agent(ctx, spec, rec, data)
end

-- A step that cannot start (its condition cannot be read, its wake time cannot be used) fails for good at
-- once. No attempt of it ran, so its alert is named by how many times it failed at its start
-- (`<task>:<step>:step_failed:start-<n>`): an operator's retry that fails the same way raises a new
-- alert, never one JetStream would drop as a repeat of the first.
local function fail_at_start(ctx, spec, rec, why, lastError)
  rec.startFailures = (rec.startFailures or 0) + 1
  give_up(ctx, spec, rec, 'run', why, lastError, true, 'start-' .. rec.startFailures)
end

-- Readiness (decision 0019 §2.4 R1): a pending step whose dependencies are all done is skipped when its
-- `when` is false (with the reason), fails when its condition cannot be read (the bytes are not msgpack:
-- a permanent failure, so the task's onFailure applies), and starts otherwise. A pass that skipped a step
-- may have made others ready, earlier in the plan too (a JSON plan's order need not be topological), so
-- passes repeat while one skipped something — at most once per step. Returns true when every step is
-- done (processed or skipped); false too when a step failed here (the task is no longer running).
local function start_ready(ctx)
  local recs, plan = recs_of(ctx), plan_of(ctx)
  for _ = 1, #plan + 1 do
    local changed = false
    for _, s in ipairs(plan) do
      local rec = recs[s.n]
      if rec.status == 'pending' then
        local ready = true
        for _, d in ipairs(s.d) do
          if not DEPENDENCY_DONE[recs[d].status] then ready = false break end
        end
        if ready then
          local holds, reason = step_condition(ctx, s, rec)
          if holds == nil then
            fail_at_start(ctx, s, rec, 'failed: its condition could not be evaluated: ' .. reason, reason)
            return false
          elseif holds and s.k == 's' then
            -- A durable sleep (R2-R4): a deadline in the index; one already due completes now.
            local wakeAt, why = sleep_until(ctx, s)
            if not wakeAt then
              fail_at_start(ctx, s, rec, 'failed: ' .. why, why)
              return false
            end
            rec.startedAt = ctx.now
            if wakeAt <= ctx.now then
              complete_without_agent(ctx, s, rec)
              changed = true
            else
              rec.status = 'sleeping'
              rec.wakeAt = wakeAt
              touch(ctx, s.n)
              redis.call('ZADD', ctx.deadlinesKey, wakeAt, deadline_member(ctx.taskId, s.n))
              push_event(ctx, 'step_sleeping', s.n, nil, nil, nil, wakeAt)
            end
          elseif holds and s.k == 'w' then
            -- A wait for a signal (R6/R7): the oldest buffered signal of its name, else wait until the timeout.
            local queue = signal_queue(ctx)
            local found
            for i, q in ipairs(queue) do
              if q.name == s.ws.s then found = i break end
            end
            rec.startedAt = ctx.now
            rec.waits = (rec.waits or 0) + 1
            if found then
              local q = table.remove(queue, found)
              local data = redis.call('HGET', ctx.taskKey, 'sd:' .. q.id)
              redis.call('HDEL', ctx.taskKey, 'sd:' .. q.id)
              if #queue == 0 then redis.call('HDEL', ctx.taskKey, 'sq') else redis.call('HSET', ctx.taskKey, 'sq', cjson.encode(queue)) end
              deliver_signal(ctx, s, rec, q.id, q.by, data)
              changed = true
            else
              rec.status = 'waiting'
              rec.timeoutAt = ctx.now + s.ws.t
              touch(ctx, s.n)
              redis.call('ZADD', ctx.deadlinesKey, rec.timeoutAt, deadline_member(ctx.taskId, s.n))
              push_event(ctx, 'step_waiting', s.n, nil, nil, nil, rec.timeoutAt, s.ws.s)
            end
          elseif holds then
            start_attempt(ctx, s, rec, 'run')
            push_event(ctx, 'step_started', s.n, rec.attempt)
          else
            rec.status = 'skipped'
            rec.reason = reason
            rec.finishedAt = ctx.now
            touch(ctx, s.n)
            push_event(ctx, 'step_skipped', s.n, nil, reason)
            changed = true
          end
        end
      end
    end
    if not changed then break end
  end
  for _, s in ipairs(plan) do
    if not DEPENDENCY_DONE[recs[s.n].status] then return false end
  end
  return true
end

-- The reply: { code, json{...}, input, name1, output1, ... } — binary values stay out of the JSON. The
-- body names the task's workflow, version and submitting client (its events' subject, decision 0010).
local function reply(code, ctx, body)
  local taskKey, dispatch = ctx.taskKey, ctx.dispatch
  -- One read for what every reply carries; a caller may have set replyTo or status itself.
  local wf = redis.call('HMGET', taskKey, 'workflow', 'version', 'client', 'createdAt', 'replyTo', 'status', 'tags')
  sync_search(ctx, wf[7], wf[4])
  body.workflow, body.version, body.client, body.createdAt = wf[1], tonumber(wf[2]), wf[3], tonumber(wf[4])
  if body.replyTo == nil then body.replyTo = wf[5] end
  if body.status == nil then body.status = wf[6] end
  body.events, body.dispatch = ctx.events, dispatch
  local out = { code, cjson.encode(body) }
  if #dispatch > 0 then
    out[3] = redis.call('HGET', taskKey, 'input') or ''
    local seen = {}
    for _, d in ipairs(dispatch) do
      for _, need in ipairs(d.needs) do
        if not seen[need] then
          seen[need] = true
          out[#out + 1] = need
          out[#out + 1] = redis.call('HGET', taskKey, 'o:' .. need) or ''
        end
      end
    end
  end
  return out
end
