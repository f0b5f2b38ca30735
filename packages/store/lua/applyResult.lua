--[[
  applyResult — records an agent's result for one step attempt (a run, or a compensation), then drives
  the task on: starts the steps it unblocks and completes the task when every step is processed, or,
  while the task is being undone, goes on with the undo. Fenced by the attempt: a result for any attempt
  but the current one, or for a phase that is not running, is rejected (STALE) and changes nothing but
  the task's staleResults count.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease
  KEYS[5] compaction index   KEYS[6] open alerts (hash)   KEYS[7] alert outbox (zset)
  KEYS[8] the bucket's search index (decision 0021)
  ARGV[1] taskId  ARGV[2] step  ARGV[3] attempt  ARGV[4] ok ('1'|'0')  ARGV[5] output (msgpack) or error message
  ARGV[6] retryable ('1'|'0')  ARGV[7] now  ARGV[8] schedulerId  ARGV[9] agentId (the instance that ran it)
  ARGV[10] circuit-open retry-after ms ('' = the breaker was not open)   ARGV[11] the lease token
  ARGV[12] kind ('run' | 'compensate')   ARGV[13] the lease duration (ms)
  ARGV[14] for a failure: what the agent knows of the effect ('none' = no try took effect, 'unknown')
  ARGV[15] the agent type whose result subject the result came on (decision 0010)
  ARGV[16] the fan-out element the result is for ('' = none; decision 0019 §4)
  ARGV[17] throttled: the service's retry-after ms ('' = not throttled; decision 0020 §5)
  ARGV[18] the name of the object the output refers to ('' = an inline output; decision 0021 §4.5)
  ARGV[19] the client whose bucket that object is in (parsed from the reference by the scheduler, which
  also checked the name is this result's own step attempt)
  ARGV[20] the limited table (JSON, '' = none; decision 0020 §1.9): steps made ready (or the undo's next
  compensation) of a limited agent type queue instead of starting

  Flow control (decision 0020): an attempt started under a limit holds a permit (`permit` in its phase);
  its result — applied (Q5) or stale for that attempt (Q12, a redelivery after a crash) — lists the permit
  under `limiter` (release) in the reply (STALE: json{reason, release: [{agent, ticket}]}). A result for
  a phase waiting for a limit (queued) is stale.

  Outcomes (decision 0009), the same for a run and a compensation phase:
    ok                 → run: processed (and ready steps start, or the task completes);
                         compensation: compensated, and the undo goes on.
    failed, permanent  → the phase gives up: a run fails and the task follows onFailure (failed + alert,
                         or the undo begins); a compensation ends the task compensation_failed + alert.
    circuit open       → not attempted: parked until the breaker half-opens (never past the give-up time)
                         without counting a failure — up to maxCircuitOpen times; past that it counts
                         like a retryable failure.
    throttled          → the service refused the call and asked for time: with the agent type in the
                         limited table (the scheduler registers a pause-only limiter for one without a
                         limit), the limiter is paused until the Retry-After and the phase goes back in
                         line (decision 0020 Q6: `limiter.pause` and a queue item in the reply); otherwise
                         parked until then like a circuit-open refusal. Either way on the same count and limit.
    failed, retryable  → the agent gave up inside its window: deadline moved to now, so the supervisor's
                         next sweep applies the failure ladder.
  A run result while the task is being undone and the step is still in flight (a drain): ok → processed
  (compensated later, in order); a failure → abandoned; then the undo goes on.
  A result from another agent type than the one the step's plan names for that phase is FORGED: nothing
  changes but the task's forgedResults count.
  An output referring to an object (ARGV[18]) in another client's bucket than the task's is FORGED too,
  counted in refusedRefs; otherwise the task owns the object from now on (`objs`), whatever the fence
  then decides: a stale attempt's upload is deleted with the task as well.
  Fan-out (decision 0019 R12, R13, U5, U6): a result names its element (ARGV[16]) and is fenced by that
  element's own attempt and status; the outcomes above apply to the element's phase, and an element
  that gives up gives its step up. A result for a fan-out step that names no element is STALE with the
  reason (an agent that does not know fan-out); an element the step does not have is UNKNOWN_STEP.
  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... } | { STALE, json{reason} }
          | { FORGED, json{reason} } | { UNKNOWN_TASK, '{}' } | { UNKNOWN_STEP, '{}' } | { LEASE_BUSY, '{}' }
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local taskId, stepName, attempt = ARGV[1], ARGV[2], tonumber(ARGV[3])
local item = (ARGV[16] and ARGV[16] ~= '') and tonumber(ARGV[16]) or nil
local ok, message, kind = ARGV[4] == '1', ARGV[5], ARGV[12]

if not take_lease(KEYS[4], ARGV[11], ARGV[13], true) then return { LEASE_BUSY, '{}' } end
-- One read for the fields the transition needs of the task (every task record has a status; a compacted
-- one no plan).
local head = redis.call('HMGET', taskKey, 'status', 'plan', 'updatedAt', 'lockedBy', 'lockEpoch')
local taskStatus = head[1]
if not taskStatus then return { UNKNOWN_TASK, '{}' } end
if (ARGV[18] or '') ~= '' then
  local owner = redis.call('HMGET', taskKey, 'client', 'objs')
  if (owner[1] or 'default') ~= ARGV[19] then
    redis.call('HINCRBY', taskKey, 'refusedRefs', 1)
    return { FORGED, cjson.encode({ reason = 'the output refers to an object in client ' .. ARGV[19] .. "'s bucket, not the task's client " .. (owner[1] or 'default') .. "'s" }) }
  end
  local objs = owner[2] and cjson.decode(owner[2]) or {}
  objs[#objs + 1] = ARGV[18]
  redis.call('HSET', taskKey, 'objs', cjson.encode(objs))
end
-- A late result for a task retention has compacted (compactFinished.lua, which drops the plan): stale, not unknown.
if not head[2] then
  if redis.call('HEXISTS', taskKey, 'c') == 1 then
    return { STALE, cjson.encode({ reason = 'the task finished and its record was compacted' }) }
  end
  return { UNKNOWN_STEP, '{}' }
end
local plan = cjson.decode(head[2])
-- Every step's record in one read, kept for the transition (ctx.recs below): the step's is read once.
local recs = load_steps(taskKey, plan)
local rec = recs[stepName]
if not rec then
  -- Not a step of the plan: by its record, if it has one (a forged name is FORGED below), as ever.
  rec = decode_step(redis.call('HGET', taskKey, 's:' .. stepName))
  if not rec then return { UNKNOWN_STEP, '{}' } end
end

-- Only the agent type the plan names for this phase may report it (its result subject says which it is).
local fanout = false
do
  local expected
  for _, s in ipairs(plan) do
    if s.n == stepName then
      expected = (kind == 'compensate' and type(s.c) == 'table') and s.c.a or s.a
      fanout = s.fe ~= nil
    end
  end
  if expected == nil then
    -- A step that calls no agent (a sleep, a wait, a child step: decision 0019): no result is its.
    redis.call('HINCRBY', taskKey, 'forgedResults', 1)
    return { FORGED, cjson.encode({ reason = 'step ' .. stepName .. ' calls no agent, but a result for it came on agent ' .. ARGV[15] .. "'s subject" }) }
  end
  if expected ~= ARGV[15] then
    redis.call('HINCRBY', taskKey, 'forgedResults', 1)
    return { FORGED, cjson.encode({ reason = 'the ' .. kind .. ' of step ' .. stepName .. ' is agent ' .. tostring(expected) .. "'s, but the result came on agent " .. ARGV[15] .. "'s subject" }) }
  end
end

local function stale(reason)
  redis.call('HINCRBY', taskKey, 'staleResults', 1)
  local body = { reason = reason }
  -- Q12: the permit of the result's attempt, if it held one, may be released again (idempotent).
  local sph = rec and (kind == 'compensate' and rec.comp or rec)
  if sph and sph.permit and sph.permit.a == attempt then body.release = { { agent = sph.permit.g, ticket = sph.permit.t } } end
  return { STALE, cjson.encode(body) }
end

-- A fan-out step's results are its elements': the element's record is the phase fenced below.
local name = stepName
if fanout and not item then
  return stale('step ' .. stepName .. ' runs once per element of a list (forEach), but the result names no element (item): the agent that sent it does not know fan-out; upgrade it (docs/protocol.md §8)')
elseif item then
  if not fanout or not rec.fe or item < 0 or item >= rec.fe.n or item ~= math.floor(item) then return { UNKNOWN_STEP, '{}' } end
  name = stepName .. '#' .. item
  rec = decode_step(redis.call('HGET', taskKey, 's:' .. name)) or { status = 'pending', attempt = 0, failureCount = 0 }
  stepName = stepName .. ' element ' .. item
end

-- Fencing: which phase this result ends, if any.
local drain = false
if kind == 'compensate' then
  if taskStatus ~= 'compensating' or rec.status ~= 'compensating' or not rec.comp or rec.comp.attempt ~= attempt or rec.comp.parked or rec.comp.reported or rec.comp.queued then
    return stale('compensation of ' .. stepName .. ' is not running at attempt ' .. attempt .. ' (task ' .. taskStatus .. ', step ' .. rec.status .. ')')
  end
else
  if taskStatus ~= 'running' and taskStatus ~= 'compensating' then return stale('task is ' .. taskStatus) end
  if rec.attempt ~= attempt or rec.status ~= 'processing' then
    return stale('step ' .. stepName .. ' is ' .. rec.status .. ' at attempt ' .. rec.attempt .. ', result is for attempt ' .. attempt)
  end
  -- One result per attempt: a second one (a duplicate delivery) after a reported failure is stale too.
  if rec.reported then return stale('step ' .. stepName .. ' already reported attempt ' .. attempt .. ' failed') end
  drain = taskStatus == 'compensating'
end

local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[3], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, tonumber(ARGV[7]), head[3]))
ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
ctx.plan = plan
ctx.recs = recs
set_limited(ctx, ARGV[20])
local lockEpoch = take_lock(taskKey, ARGV[8], { head[4], head[5] })
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
local spec
if item then
  spec = spec_of(ctx, ARGV[2])
  rec = rare().element_rec(ctx, spec, item)
  spec = rare().element_spec(ctx, spec, item)
else
  rec = recs_of(ctx)[name]
  spec = spec_of(ctx, name)
end
-- Which agent instance ran the attempt: known from its result (agents hold no claim, decision 0010).
local sp, ph = phase_spec(spec, kind), phase(rec, kind)
ph.lockedBy = ARGV[9]
release_permit(ctx, ph, attempt)
touch(ctx, name)
if not ok and kind == 'run' then note_effect(rec, ARGV[14] == 'none' and 'none' or 'unknown') end

if ok and kind == 'compensate' then
  rec.status = 'compensated'
  ph.finishedAt = ctx.now
  ph.error = nil
  redis.call('ZREM', deadlinesKey, deadline_member(taskId, name))
  push_event(ctx, 'compensation_done', name, attempt)
  if item then
    -- An element's compensation: the next ones start; the undo moves on once the step's are all done.
    local sspec, srec = spec_of(ctx, spec.fs), recs_of(ctx)[spec.fs]
    srec.fe.compRunning = srec.fe.compRunning - 1
    if rare().fe_comp_fill(ctx, sspec, srec) and srec.status == 'compensated' then rare().next_compensation(ctx) end
  else
    rare().next_compensation(ctx)
  end
elseif ok and item then
  if rare().fe_element_done(ctx, spec, rec, message, drain) then
    if start_ready(ctx) then finish_task(ctx, 'completed') end
  elseif drain then
    rare().next_compensation(ctx)
  end
elseif ok then
  rec.status = 'processed'
  rec.finishedAt = ctx.now
  rec.error = nil
  note_effect(rec, 'applied')
  -- Completion order: compensations run in its reverse.
  rec.order = redis.call('HINCRBY', taskKey, 'doneSeq', 1)
  redis.call('HSET', taskKey, 'o:' .. stepName, message)
  redis.call('ZREM', deadlinesKey, deadline_member(taskId, stepName))
  push_event(ctx, 'step_done', stepName, attempt)
  if drain then rare().next_compensation(ctx)
  elseif start_ready(ctx) then finish_task(ctx, 'completed') end
elseif drain then
  -- A throttle in a drain is a drain (abandoned), but the service's pause still holds for the others.
  local agent = (ARGV[17] or '') ~= '' and limited_agent(ctx, spec, kind)
  if agent then limiter_add(ctx, agent, 'pause', { u = ctx.now + tonumber(ARGV[17]) }) end
  rare().abandon(ctx, spec, rec, 'ended while the task was being undone: ' .. message)
elseif (ARGV[17] or '') ~= '' and limited_agent(ctx, spec, kind) then
  -- Q6 (decision 0020 §5): paused in the limiter, back in line; past maxCircuitOpen a retryable failure.
  if not rare().throttle_phase(ctx, spec, rec, kind, limited_agent(ctx, spec, kind), tonumber(ARGV[17]), message) then
    rare().report_retryable(ctx, spec, rec, kind, message .. ' (' .. ph.circuitCount .. ' attempts refused by an open breaker or a throttling service, over maxCircuitOpen ' .. (sp.l[4] or 10) .. ': each now counts as a failure)')
  end
elseif ARGV[10] ~= '' or (ARGV[17] or '') ~= '' then
  local throttled = (ARGV[17] or '') ~= ''
  ph.circuitCount = (ph.circuitCount or 0) + 1
  local limit = sp.l[4] or 10
  if ph.circuitCount <= limit then
    local untilTs = ctx.now + tonumber(throttled and ARGV[17] or ARGV[10])
    if ph.giveUpAt and untilTs > ph.giveUpAt then untilTs = ph.giveUpAt end
    ph.error = message
    ph.parkedFor = 'breaker' -- why it is parked, for `triad status` (decision 0021 §3.2): a refusal, the breaker's or a throttling service's
    rare().park(ctx, spec, rec, kind, untilTs, throttled and ('throttled by the service: ' .. message) or message)
  else
    rare().report_retryable(ctx, spec, rec, kind, message .. ' (' .. ph.circuitCount .. ' attempts refused by an open breaker or a throttling service, over maxCircuitOpen ' .. limit .. ': each now counts as a failure)')
  end
elseif ARGV[6] == '0' then
  rare().give_up(ctx, spec, rec, kind, 'failed permanently: ' .. message, message, true)
else
  rare().report_retryable(ctx, spec, rec, kind, message)
end

flush(ctx)
return reply(OK, ctx, { lockEpoch = lockEpoch })
