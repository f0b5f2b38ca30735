--[[
  startQueued — starts a phase that waited for a limit, with the permit its limiter granted (decision 0020
  §2.3 Q4, Q10, Q11). Fenced by the ticket: only a phase that still holds ticket ARGV[4] in its `q` starts,
  so a grant is started at most once, whoever calls this and however often.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] the scheduler's task lease
  ARGV[1] taskId  ARGV[2] phase (the step name)  ARGV[3] kind ('run' | 'compensate')  ARGV[4] ticket
  ARGV[5] the granted complete-by (epoch ms)  ARGV[6] now  ARGV[7] schedulerId  ARGV[8] the lease token
  ARGV[9] the lease duration (ms)

  Q4 (the phase holds the ticket, its task runs — or is being undone, for a compensation — and there is
  time left): start_attempt with the granted complete-by; the give-up time moves by the wait; waitedMs
  grows by it; `permit` = { t ticket, g agent, k key, a attempt }; the event its direct start would have
  emitted, its reason saying how long it waited → { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... }
  Q10 (now ≥ complete-by − min(100 ms, budget / 2): the start came too late after the grant) → { LATE, '{}' }, nothing
  written: the caller releases the permit and puts the ticket back in line.
  Q11 (the phase no longer holds the ticket) → { STALE, json{reason, release} }: release is false when the
  phase runs an attempt started from this ticket (another scheduler started it first: its permit stays),
  true otherwise (the ticket is dead).
  { UNKNOWN_TASK, '{}' } (the task was removed: the ticket is dead) | { LEASE_BUSY, '{}' }
]]
--@include _common

local LATE = 13
local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local taskId, name, kind, ticket = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local completeBy = tonumber(ARGV[5])

if not take_lease(KEYS[3], ARGV[8], ARGV[9], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
local taskStatus = redis.call('HGET', taskKey, 'status')
local rec = decode_step(redis.call('HGET', taskKey, 's:' .. name))
local ph = rec and (kind == 'compensate' and rec.comp or rec) or nil

local function stale(reason)
  local release = true
  if ph and ph.permit and ph.permit.t == ticket then
    local running
    if kind == 'compensate' then
      running = rec.status == 'compensating' and not ph.parked and not ph.reported and not ph.queued
    else
      running = rec.status == 'processing' and not ph.reported
    end
    if running and ph.attempt == ph.permit.a then release = false end
  end
  return { STALE, cjson.encode({ reason = reason, release = release }) }
end

if not ph or not ph.q or ph.q.t ~= ticket then return stale('the ' .. kind .. ' of ' .. name .. ' no longer waits with ticket ' .. ticket) end
if (kind == 'run' and (taskStatus ~= 'running' or rec.status ~= 'queued')) or (kind == 'compensate' and (taskStatus ~= 'compensating' or not ph.queued)) then
  return stale('task is ' .. tostring(taskStatus) .. ', step ' .. rec.status)
end

local ctx = new_ctx(taskKey, deadlinesKey, nil, taskId, task_now(taskKey, tonumber(ARGV[6])))
-- Too late: less than 100 ms (or half the phase's budget, when that is shorter) left before the granted complete-by.
if ctx.now >= completeBy - math.min(100, math.floor((ph.q.b or 200) / 2)) then return { LATE, '{}' } end
local lockEpoch = take_lock(taskKey, ARGV[7])
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
local spec
local base, item = element_of(name)
if base then
  -- A fan-out element (decision 0020 §2.7): its record and its element spec.
  spec = spec_of(ctx, base)
  rec = element_rec(ctx, spec, item)
  spec = element_spec(ctx, spec, item)
else
  spec = spec_of(ctx, name)
  rec = recs_of(ctx)[name]
end
ph = phase(rec, kind)
local q = ph.q
local waited = math.max(0, ctx.now - q.since)
if ph.giveUpAt then ph.giveUpAt = ph.giveUpAt + waited end
ph.waitedMs = (ph.waitedMs or 0) + waited
ph.q, ph.queued = nil, nil
start_attempt(ctx, spec, rec, kind, completeBy)
ph.permit = { t = ticket, g = q.a, k = q.k, a = ph.attempt, f = q.f }
local note = '(waited ' .. string.format('%.1f', waited / 1000) .. ' s for a limit of ' .. q.a .. ')'
push_event(ctx, q.e or 'step_started', name, ph.attempt, q.r and (q.r .. ' ' .. note) or note)
if kind == 'compensate' then ph.error = nil end
if q.e == 'step_retried' then ph.error = nil end
flush(ctx)
return reply(OK, ctx, { lockEpoch = lockEpoch })
