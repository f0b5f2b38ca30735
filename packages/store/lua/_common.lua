-- Shared fragment, inlined by the loader wherever a script says --@include _common.
-- Return codes (mirrored by ScriptCode in src/codes.ts).
local OK, EXISTS, UNKNOWN_TASK, STALE, INVALID_STATE, VERSION_CONFLICT, UNKNOWN_STEP, STALE_EPOCH, LEASE_BUSY, FORGED, BUFFER_FULL, UNKNOWN_SCHEDULE = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
-- A bulk operation already acted on this task (decision 0021 §2.3).
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
local function task_now(taskKey, now, updatedAt)
  -- `updatedAt`: the task's field when the caller read it with others already (else read here).
  local last = tonumber(updatedAt or redis.call('HGET', taskKey, 'updatedAt'))
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
-- A fan-out element's phase is named `<step>#<i>` (its record field, its deadline member): its events name
-- the step and carry the element's index as `item`.
local function element_of(name)
  -- A plain find first: the pattern backtracks over the whole name, and most names have no '#'.
  if not string.find(name, '#', 1, true) then return nil, nil end
  local step, i = string.match(name, '^(.+)#(%d+)$')
  if step then return step, tonumber(i) end
  return nil, nil
end

local function push_event(ctx, etype, step, attempt, reason, status, untilTs, signal)
  local seq = redis.call('HINCRBY', ctx.taskKey, 'seq', 1)
  local item
  if step then
    local base, i = element_of(step)
    if base then step, item = base, i end
  end
  ctx.events[#ctx.events + 1] = { type = etype, seq = seq, step = step, attempt = attempt, reason = reason, status = status, ['until'] = untilTs, signal = signal, item = item }
end

-- Takes the task for this scheduler; the lock epoch grows on every hand-over between schedulers.
-- `known`: { lockedBy, lockEpoch } when the caller read them with others already (else read here).
local function take_lock(taskKey, schedulerId, known)
  local owner = known and known[1] or redis.call('HGET', taskKey, 'lockedBy')
  if owner ~= schedulerId then
    redis.call('HSET', taskKey, 'lockedBy', schedulerId)
    return redis.call('HINCRBY', taskKey, 'lockEpoch', 1)
  end
  return tonumber(known and known[2] or redis.call('HGET', taskKey, 'lockEpoch'))
end

---------------------------------------------------------------------------------------------------
-- The rarely needed functions — alerts, the search index's members, parks, the limiter's queue, fan-out,
-- child tasks, the undo, the failure ladder, conditions, sleeps and signals, msgpack paths — are built
-- on first use, by rare() (build_rare, below): a Lua chunk creates every closure its top level defines
-- on every call, and with these a plain step's transition spent most of its time building functions it
-- never called (docs/performance.md, "A plain task's cost"). The core below reaches them as
-- `rare().name`; the rest of a script names them as before (the loader, src/scripts.ts, makes a local
-- `name = rare().name` at `--@lazy-imports` for each one it uses).
---------------------------------------------------------------------------------------------------
local RARE, build_rare
local function rare()
  if not RARE then RARE = build_rare() end
  return RARE
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
  redis.call('ZREM', searchKey, unpack(rare().other_status_members(status, createdAt, ctx.taskId)))
  redis.call('ZADD', searchKey, 0, rare().search_member('s', status, createdAt, ctx.taskId))
end

-- A child task that finished in this transition tells its parent (decision 0019 §5.3): its output (when
-- completed) is assembled as `out`, it stays in the finished and compaction indexes until `holdUntil` (its
-- parent may undo it until then), and the notice member `<taskId>|#parent` enters its deadline index, due
-- now, atomically with the end; the leader supervisor delivers it. `parent`, `holdUntil`: the task's
-- fields, read by the caller with what it reads anyway (a plain task costs no call more).
local PARENT_NOTICE = '#parent'
local function notify_parent(ctx, parent, holdUntil)
  local ended = ctx.finishedNow
  if not ended or not parent or parent == '' then return end
  ctx.finishedNow = nil
  if ended == 'completed' then redis.call('HSET', ctx.taskKey, 'out', rare().task_output(ctx)) end
  local hold = tonumber(holdUntil)
  if hold and hold > ctx.now then
    redis.call('ZADD', ctx.finished.zset, 'XX', hold, ctx.taskId)
    redis.call('ZADD', ctx.finished.compact, 'XX', hold, ctx.taskId)
  end
  redis.call('ZADD', ctx.deadlinesKey, ctx.now, ctx.taskId .. '|' .. PARENT_NOTICE)
end

-- sync_search for a transition that does not end with reply(): reads the fields only when the status
-- changed (and, for a child task that finished now, tells its parent).
local function sync_search_read(ctx)
  if not ctx.newStatus then return end
  local v = redis.call('HMGET', ctx.taskKey, 'tags', 'createdAt', 'parent', 'holdUntil')
  sync_search(ctx, v[1], v[2])
  notify_parent(ctx, v[3], v[4])
end

-- Marks the task finished and files it for retention: in the finished index, and, when it can never
-- be retried (completed, compensated, cancelled; `retryStep` takes only failed and compensation_failed
-- ones), in the compaction index that retention reads in O(due) (compactFinished.lua, decision 0007).
-- Its own deadline, if it had one, no longer applies.
local function finish_task(ctx, status, reason)
  local now = ctx.now
  redis.call('HSET', ctx.taskKey, 'status', status, 'finishedAt', now, 'updatedAt', now)
  note_status(ctx, status)
  ctx.finishedNow = status
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
local function start_attempt(ctx, spec, rec, kind, grantedCompleteBy)
  local sp, ph = phase_spec(spec, kind), phase(rec, kind)
  local now = ctx.now
  ph.attempt = (ph.attempt or 0) + 1
  ph.completeBy = grantedCompleteBy or (now + sp.b)
  ph.startedAt = now
  ph.finishedAt = nil
  ph.lockedBy = nil
  ph.reported = nil
  if not ph.giveUpAt and sp.g then ph.giveUpAt = now + sp.g end
  local needs = spec.nd
  -- A fan-out element's request names its step and its index (`spec.fs`, `spec.item`, `spec.count`).
  local dispatch = { step = spec.fs or spec.n, agent = sp.a, kind = kind, attempt = ph.attempt, completeBy = ph.completeBy, item = spec.item, count = spec.count }
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


---------------------------------------------------------------------------------------------------
-- Flow control (decision 0020 §2): a phase whose agent type is limited waits `queued` with a ticket
-- instead of starting; the scheduler hands the ticket to the agent type's limiter (another slot) and,
-- when the limiter grants it, starts it with startQueued.lua. `ctx.limited` is the limited table the
-- caller passed (ARGV; nil when ''), `ctx.limiter` what the transition asks of the limiters — per agent
-- type { queue, release, dequeue } — returned in the reply as `limiter` (absent when empty: a transition
-- with no limit in its way reads and writes nothing more).
---------------------------------------------------------------------------------------------------
local QUEUE_CHECK_MS, QUEUE_CHECK_MAX_MS = 10000, 300000

local function set_limited(ctx, raw)
  if raw and raw ~= '' then ctx.limited = cjson.decode(raw) end
end

local function limiter_add(ctx, agent, what, v)
  ctx.limiter = ctx.limiter or {}
  local l = ctx.limiter[agent]
  if not l then
    l = {}
    ctx.limiter[agent] = l
  end
  l[what] = l[what] or {}
  l[what][#l[what] + 1] = v
end

-- The agent type of a phase when it is limited (a step's, or a fan-out element's: decision 0020 §2.7).
local function limited_agent(ctx, spec, kind)
  if not ctx.limited then return nil end
  local sp = phase_spec(spec, kind)
  if type(sp) ~= 'table' or not sp.a or not ctx.limited[sp.a] then return nil end
  return sp.a
end

-- start_or_queue (§2.2), as its callers use it: queues the phase and returns true when its agent type is
-- limited; returns false (the caller starts it as before) otherwise.
local function maybe_queue(ctx, spec, rec, kind, ev, evReason)
  local agent = limited_agent(ctx, spec, kind)
  if not agent then return false end
  rare().queue_phase(ctx, spec, rec, kind, agent, ev, evReason)
  return true
end

-- Q5: the attempt that reported held a permit: it is released.
local function release_permit(ctx, ph, attempt)
  if ph.permit and ph.permit.a == attempt then limiter_add(ctx, ph.permit.g, 'release', ph.permit.t) end
end

-- A dependency is done when it is processed or skipped (decision 0019 §2.3: a skipped step's
-- dependents run; it has no output, so a step that needs it gets none).
local DEPENDENCY_DONE = { processed = true, skipped = true }

---------------------------------------------------------------------------------------------------
-- The rare functions (see rare() above): defined when a transition first needs one of them. The loader
-- turns `--@lazy-end` into the table of every top-level local between the two markers.
---------------------------------------------------------------------------------------------------
build_rare = function()
--@lazy-begin
--@include _msgpack
--@include _when

-- An operator alert, recorded by the transition that makes it necessary (decision 0009): in the open
-- alerts (closed by a retry of the task) and in the outbox the leader supervisor publishes from. Its id,
-- `<taskId>:<step>:<kind>:<attempt>`, is unique per give-up (a retried step that fails again is a new
-- alert, never dropped as a repeat). Needs ctx.alertsKey and ctx.outboxKey (the calling script's KEYS).
local function record_alert(ctx, kind, step, failureCount, lastError, attempt)
  local alert = { id = ctx.taskId .. ':' .. (step or TASK_DEADLINE) .. ':' .. kind .. ':' .. (attempt or 0), kind = kind, taskId = ctx.taskId,
    step = step, failureCount = failureCount, raisedAt = ctx.now }
  -- An element's alert names its step and its index (its id keeps `<step>#<i>`: one alert per element).
  local base, i = element_of(step or '')
  if base then alert.step, alert.item = base, i end
  if lastError then alert.lastError = string.sub(lastError, 1, 4000) end
  local json = cjson.encode(alert)
  redis.call('HSET', ctx.alertsKey, alert.id, json)
  redis.call('ZADD', ctx.outboxKey, ctx.now, json)
end

-- A msgpack string header for `n` bytes.
local function mp_str_header(n)
  if n < 32 then return string.char(0xa0 + n) end
  if n < 256 then return string.char(0xd9, n) end
  return string.char(0xda) .. struct.pack('>I2', n)
end

-- A task's output (decision 0019 §5.5): the map { <step>: <output> } of its processed sink steps (those
-- no other step depends on), assembled from the stored bytes, never decoded (nil for a step without one).
local function task_output(ctx)
  local plan = ctx.plan or cjson.decode(redis.call('HGET', ctx.taskKey, 'plan'))
  local inner = {}
  for _, s in ipairs(plan) do for _, d in ipairs(s.d) do inner[d] = true end end
  local parts, count = {}, 0
  for _, s in ipairs(plan) do
    if not inner[s.n] then
      local rec = ctx.recs and ctx.recs[s.n] or decode_step(redis.call('HGET', ctx.taskKey, 's:' .. s.n))
      if rec and rec.status == 'processed' then
        local out = redis.call('HGET', ctx.taskKey, 'o:' .. s.n)
        if not out or out == '' then out = string.char(0xc0) end
        parts[#parts + 1] = mp_str_header(#s.n) .. s.n .. out
        count = count + 1
      end
    end
  end
  local header
  if count < 16 then header = string.char(0x80 + count) else header = string.char(0xde) .. struct.pack('>I2', count) end
  return header .. table.concat(parts)
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

-- A step's key value (§1.1): the task input's value at the limit's path, as a string; '' when absent, nil,
-- a map or an array; a value over 128 bytes or holding a control byte becomes '#' and its SHA-1.
local function limit_key(ctx, path)
  if type(path) ~= 'table' or #path == 0 then return '' end
  if ctx.input == nil then
    local raw = redis.call('HGET', ctx.taskKey, 'input')
    ctx.input = (raw and raw ~= '') and raw or false
  end
  if not ctx.input then return '' end
  local pos = mp_locate(ctx.input, 1, path)
  if not pos then return '' end
  local kind, v = mp_scalar(ctx.input, pos)
  local s
  if kind == 'str' or kind == 'bin' then s = v
  elseif kind == 'int' then s = string.format('%.0f', v)
  elseif kind == 'float' then s = string.format('%.17g', v)
  elseif kind == 'bool' then s = v and 'true' or 'false'
  else return '' end
  if #s > 128 or string.find(s, '[%z\1-\31]') then s = '#' .. redis.sha1hex(s) end
  return s
end

-- The queue item of a queued phase, for the limiter (limitApply's `queue`).
local function queue_item(ctx, spec, ph)
  local q = ph.q
  return { t = q.t, task = ctx.taskId, s = spec.n, c = q.c, k = q.k, p = q.p, f = q.f, b = q.b or phase_spec(spec, q.c).b }
end

-- Q1/Q2/Q3/Q6: the phase waits for a permit. `ev`, `evReason`: the event its start will emit (step_started,
-- step_retried with the last error, compensation_started). The attempt, failure count and complete-by
-- do not move; the check member (§2.6) is its only deadline.
local function queue_phase(ctx, spec, rec, kind, agent, ev, evReason, firstAt, why, note)
  local ph = phase(rec, kind)
  local now = ctx.now
  ph.qn = (ph.qn or 0) + 1
  local T = ctx.taskId .. '|' .. spec.n .. '|' .. kind .. '|' .. ph.qn
  if ctx.priority == nil then ctx.priority = tonumber(redis.call('HGET', ctx.taskKey, 'priority')) or 3 end
  local key = limit_key(ctx, ctx.limited[agent].k)
  local at = now + QUEUE_CHECK_MS
  ph.q = { t = T, c = kind, a = agent, k = key, p = ctx.priority, b = phase_spec(spec, kind).b, since = now, f = firstAt or now, n = ph.qn, check = 1, at = at, why = why or 'limit', e = ev, r = evReason }
  if kind == 'compensate' then
    ph.queued = true
    ph.parked = nil
    rec.status = 'compensating'
  else
    rec.status = 'queued'
  end
  redis.call('ZADD', ctx.deadlinesKey, at, deadline_member(ctx.taskId, spec.n))
  push_event(ctx, 'step_queued', spec.n, (ph.attempt or 0) > 0 and ph.attempt or nil,
    note or ('waiting for a limit of ' .. agent .. ' (' .. (key ~= '' and ('key ' .. key .. ', ') or '') .. 'priority ' .. ctx.priority .. ')'))
  limiter_add(ctx, agent, 'queue', queue_item(ctx, spec, ph))
  touch(ctx, spec.n)
end

-- Q8: a queued phase stops waiting (its ticket is dequeued from the limiter).
local function drop_ticket(ctx, ph)
  if ph.q then
    limiter_add(ctx, ph.q.a, 'dequeue', ph.q.t)
    ph.q = nil
    ph.queued = nil
  end
end

-- Q6: a throttled result of a limited agent type (decision 0020 §5): the service's Retry-After pauses the
-- agent type (or, by the limit's pausePerKey, which the scheduler knows, the step's key) in its limiter,
-- and the phase goes back in line — first of its key, at its first wait's time — as a refusal on the
-- phase's maxCircuitOpen, not a failure. Returns true when it did (false: past maxCircuitOpen).
local function throttle_phase(ctx, spec, rec, kind, agent, retryAfterMs, message)
  local ph = phase(rec, kind)
  ph.circuitCount = (ph.circuitCount or 0) + 1
  local limit = phase_spec(spec, kind).l[4] or 10
  if ph.circuitCount > limit then return false end
  local untilTs = ctx.now + retryAfterMs
  local firstAt = (ph.permit and ph.permit.a == ph.attempt and ph.permit.f) or nil
  ph.error = message
  queue_phase(ctx, spec, rec, kind, agent, 'step_retried', message, firstAt, 'throttled',
    'throttled by ' .. agent .. ': paused until ' .. untilTs .. ' (Retry-After ' .. retryAfterMs .. ' ms): ' .. message)
  limiter_add(ctx, agent, 'pause', { k = ph.q.k, u = untilTs })
  return true
end


---------------------------------------------------------------------------------------------------
-- Fan-out (decision 0019 §4): a step with `fe` in its plan runs its agent once per element of a list,
-- located when the step becomes ready and kept as bytes (`fl:<step>`) with its n + 1 element offsets
-- (`fo:<step>`, big-endian u32). Element i is a phase of its own — record `s:<step>#<i>`, deadline member
-- `<task>|<step>#<i>`, output `o:<step>#<i>` — driven by the same phase functions as a step, through an
-- element spec (`fs` = the step, `item` = i). The step's record keeps `fe = { n, next, hi, live, done,
-- lastStart }` (`live`: the elements started and not ended, processing or parked, at most maxParallel),
-- and during its undo `undo` (the elements to compensate, latest first), `undoNext`, `compRunning`, `compFailed`.
---------------------------------------------------------------------------------------------------

local function element_name(step, i) return step .. '#' .. i end

-- Element i's phase spec: the step's agent, budget, ladder, give-up and compensation, under its own name.
local function element_spec(ctx, spec, i)
  local srec = recs_of(ctx)[spec.n]
  return { n = element_name(spec.n, i), a = spec.a, b = spec.b, l = spec.l, g = spec.g, c = spec.c, nd = spec.nd,
    fs = spec.n, item = i, count = srec.fe and srec.fe.n }
end

-- Element i's record, read at most once per transition (kept in ctx.recs under its name, so `flush` writes it).
local function element_rec(ctx, spec, i)
  local recs = recs_of(ctx)
  local name = element_name(spec.n, i)
  local rec = recs[name]
  if not rec then
    rec = decode_step(redis.call('HGET', ctx.taskKey, 's:' .. name)) or { status = 'pending', attempt = 0, failureCount = 0 }
    recs[name] = rec
  end
  return rec
end

-- Elements 0 … count-1 read in one HMGET (those not read yet).
local function elements_load(ctx, spec, count)
  local recs = recs_of(ctx)
  local fields, names = {}, {}
  for i = 0, count - 1 do
    local name = element_name(spec.n, i)
    if not recs[name] then
      fields[#fields + 1] = 's:' .. name
      names[#names + 1] = name
    end
  end
  if #fields == 0 then return end
  local raw = redis.call('HMGET', ctx.taskKey, unpack(fields))
  for k, name in ipairs(names) do
    recs[name] = decode_step(raw[k]) or { status = 'pending', attempt = 0, failureCount = 0 }
  end
end

local function fe_live_remove(fe, i)
  for k, v in ipairs(fe.live) do
    if v == i then
      table.remove(fe.live, k)
      return true
    end
  end
  return false
end

-- Element i's value: its byte slice of the list the step snapshotted (read once per transition).
local function element_value(ctx, step, i)
  ctx.lists = ctx.lists or {}
  local l = ctx.lists[step]
  if not l then
    local raw = redis.call('HMGET', ctx.taskKey, 'fl:' .. step, 'fo:' .. step)
    l = { raw[1] or '', raw[2] or '' }
    ctx.lists[step] = l
  end
  local from = struct.unpack('>I4', l[2], 4 * i + 1)
  local to = struct.unpack('>I4', l[2], 4 * i + 5)
  return string.sub(l[1], from + 1, to)
end

-- Starts element i's first (or next) attempt.
local function fe_start(ctx, spec, srec, i)
  local espec = element_spec(ctx, spec, i)
  local erec = element_rec(ctx, spec, i)
  -- An element of a limited agent type waits for a permit; it counts toward maxParallel all the same (§2.7).
  if not maybe_queue(ctx, espec, erec, 'run', 'step_started') then
    start_attempt(ctx, espec, erec, 'run')
    push_event(ctx, 'step_started', espec.n, erec.attempt)
  end
  local fe = srec.fe
  fe.live[#fe.live + 1] = i
  fe.lastStart = ctx.now
  if i + 1 > (fe.hi or 0) then fe.hi = i + 1 end
  touch(ctx, spec.n)
end

-- Starts pending elements in index order while fewer than maxParallel are started and not ended.
local function fe_fill(ctx, spec, srec)
  local fe = srec.fe
  while #fe.live < spec.fe.x and fe.next < fe.n do
    local i = fe.next
    fe.next = i + 1
    if element_rec(ctx, spec, i).status == 'pending' then fe_start(ctx, spec, srec, i) end
  end
  touch(ctx, spec.n)
end

-- The step's output: a msgpack array header and the elements' stored outputs, concatenated in index
-- order, never decoded (nil, 0xc0, for an element that returned none). Returns the bytes.
local function fe_output(ctx, spec, n)
  local parts = {}
  if n < 16 then parts[1] = string.char(0x90 + n)
  elseif n < 65536 then parts[1] = string.char(0xdc) .. struct.pack('>I2', n)
  else parts[1] = string.char(0xdd) .. struct.pack('>I4', n) end
  if n > 0 then
    local fields = {}
    for i = 0, n - 1 do fields[i + 1] = 'o:' .. element_name(spec.n, i) end
    local outs = redis.call('HMGET', ctx.taskKey, unpack(fields))
    for i = 1, n do
      local o = outs[i]
      if not o or o == '' then o = string.char(0xc0) end
      parts[#parts + 1] = o
    end
  end
  return table.concat(parts)
end

-- Completion order of processed steps, and the undo's order (decision 0009): processed steps by
-- completion time, in-doubt steps by their last start, an in-doubt step before a processed one at the
-- same millisecond, the completion counter between processed ones.
local function undo_key(rec)
  if rec.status == 'processed' then return rec.finishedAt or 0, 0, rec.order or 0 end
  -- A fan-out step that did not complete: by its last element start.
  return (rec.fe and rec.fe.lastStart) or rec.startedAt or 0, 1, 0
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


-- A fan-out step's undo goes on (U5, U6): element compensations start, latest first, while fewer than
-- maxParallel run and none has failed. When none runs any more, the step is compensated — or, if one
-- failed, compensation_failed and the task with it, with one alert per failed element, recorded by this
-- transition, the one that ends the task (decision 0009 §4). Returns true when the step's undo ended.
local function fe_comp_fill(ctx, spec, srec)
  local fe = srec.fe
  while (fe.compFailed or 0) == 0 and fe.compRunning < spec.fe.x and fe.undoNext <= #fe.undo do
    local i = fe.undo[fe.undoNext]
    fe.undoNext = fe.undoNext + 1
    local espec = element_spec(ctx, spec, i)
    local erec = element_rec(ctx, spec, i)
    if not maybe_queue(ctx, espec, erec, 'compensate', 'compensation_started') then
      local comp = start_attempt(ctx, espec, erec, 'compensate')
      comp.error = nil
      push_event(ctx, 'compensation_started', espec.n, comp.attempt)
    end
    fe.compRunning = fe.compRunning + 1
  end
  touch(ctx, spec.n)
  if fe.compRunning > 0 then return false end
  srec.comp = srec.comp or { attempt = 0, failureCount = 0 }
  srec.comp.finishedAt = ctx.now
  if (fe.compFailed or 0) > 0 then
    srec.status = 'compensation_failed'
    finish_task(ctx, 'compensation_failed', 'compensation of ' .. spec.n .. ' failed for ' .. fe.compFailed .. ' of its elements')
    elements_load(ctx, spec, fe.hi or 0)
    for k = 1, fe.undoNext - 1 do
      local name = element_name(spec.n, fe.undo[k])
      local e = recs_of(ctx)[name]
      if e.status == 'compensation_failed' then record_alert(ctx, 'compensation_failed', name, e.comp.failureCount, e.comp.error, e.comp.attempt) end
    end
    return true
  end
  srec.status = 'compensated'
  push_event(ctx, 'compensation_done', spec.n)
  return true
end

-- A fan-out step's turn in the undo: the elements that may have taken effect, by the undo order of
-- 0009 (the latest first; the higher index first at a tie), are compensated up to maxParallel at once.
local function fe_comp_begin(ctx, spec, srec)
  local fe = srec.fe
  local hi = fe.hi or 0
  elements_load(ctx, spec, hi)
  local recs = recs_of(ctx)
  local list = {}
  for i = 0, hi - 1 do
    local e = recs[element_name(spec.n, i)]
    if UNDOABLE[e.status] and (e.effect or 'none') ~= 'none' then list[#list + 1] = i end
  end
  table.sort(list, function(a, b)
    local ra, rb = recs[element_name(spec.n, a)], recs[element_name(spec.n, b)]
    if undo_before(ra, rb) then return true end
    if undo_before(rb, ra) then return false end
    return a > b
  end)
  fe.undo, fe.undoNext, fe.compRunning, fe.compFailed = list, 1, 0, 0
  srec.status = 'compensating'
  srec.comp = srec.comp or { attempt = 0, failureCount = 0 }
  srec.comp.attempt = srec.comp.attempt + 1
  srec.comp.startedAt = ctx.now
  push_event(ctx, 'compensation_started', spec.n, nil, #list .. ' of ' .. fe.n .. ' elements to compensate')
  return fe_comp_fill(ctx, spec, srec)
end

-- A fan-out step whose last element in flight ended while its task is being undone (U4): processed
-- when every element was (its output assembled: it is compensated later, in order), else abandoned
-- with the most its elements may have done.
local function fe_settle(ctx, spec, srec)
  if #srec.fe.live > 0 or srec.status ~= 'processing' then return end
  srec.finishedAt = ctx.now
  if srec.fe.done == srec.fe.n then
    srec.status = 'processed'
    srec.order = redis.call('HINCRBY', ctx.taskKey, 'doneSeq', 1)
    redis.call('HSET', ctx.taskKey, 'o:' .. spec.n, fe_output(ctx, spec, srec.fe.n))
    push_event(ctx, 'step_done', spec.n, srec.attempt)
  else
    srec.status = 'abandoned'
    push_event(ctx, 'step_abandoned', spec.n, srec.attempt, srec.fe.done .. ' of ' .. srec.fe.n .. ' elements done when the task began to be undone')
  end
  touch(ctx, spec.n)
end

-- An element leaves the elements in flight (it ended, gave up or was abandoned): the step takes the most
-- it may have done (0009's effect, the maximum over its elements).
local function fe_left(ctx, espec, erec)
  local sspec = spec_of(ctx, espec.fs)
  local srec = recs_of(ctx)[espec.fs]
  fe_live_remove(srec.fe, espec.item)
  note_effect(srec, erec.effect or 'none')
  touch(ctx, espec.fs)
  return sspec, srec
end

-- Stops a fan-out step's elements that are not in flight (parked, or reported failed with their retry
-- not decided): abandoned, with `why`. Elements in flight are left to end (their result or complete-by).
local function fe_stop_idle(ctx, spec, srec, why, all)
  local fe = srec.fe
  local live = {}
  for k, i in ipairs(fe.live) do live[k] = i end
  for _, i in ipairs(live) do
    local espec = element_spec(ctx, spec, i)
    local e = element_rec(ctx, spec, i)
    if all or e.status == 'parked' or e.status == 'queued' or (e.status == 'processing' and e.reported) then
      if all and e.status == 'processing' and not e.reported then note_effect(e, 'unknown') end
      if e.status == 'queued' then drop_ticket(ctx, e) end
      e.status = 'abandoned'
      e.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, espec.n))
      push_event(ctx, 'step_abandoned', espec.n, e.attempt, why .. (e.error and (': ' .. e.error) or ''))
      touch(ctx, espec.n)
      fe_left(ctx, espec, e)
    end
  end
end

---------------------------------------------------------------------------------------------------
-- Child tasks (decision 0019 §5): a child step's phases are operations on another task — `start` (its
-- run), `cancel` (the run stopped: the parent is undone or fails, or its timeout passed), `undo` (its
-- compensation) — which the caller applies to the child's bucket (startChild, cancelChild, undoChild);
-- their dispatch carries `child` (the operation), `childId` and `sent` (how many times the step's
-- operations were sent: the message ids of re-sends differ). The step's record keeps
-- `child = { id, op, sent, next, timeoutAt, timedOut, ended }`; its member `<task>|<step>` is the check
-- that re-sends the current operation (first after 5 s, then every 60 s) until the child's notice
-- arrives (childEnded.lua), or a declared timeout cancels the child.
---------------------------------------------------------------------------------------------------
local CHILD_FIRST_CHECK_MS, CHILD_CHECK_MS = 5000, 60000

-- What the parent step's run may have done, by how its child ended (decision 0019 §5.4).
local CHILD_EFFECT = { completed = 'applied', failed = 'unknown', compensation_failed = 'unknown', cancelled = 'none', compensated = 'none' }

-- The check member at now + delay (never after a declared timeout that has not fired).
local function child_check(ctx, spec, rec, delay)
  local c = rec.child
  c.next = ctx.now + delay
  local at = c.next
  if c.op == 'start' and c.timeoutAt and not c.timedOut and c.timeoutAt < at then at = c.timeoutAt end
  redis.call('ZADD', ctx.deadlinesKey, at, deadline_member(ctx.taskId, spec.n))
  touch(ctx, spec.n)
end

-- Asks the caller to apply the step's current operation to its child task.
local function child_dispatch(ctx, spec, rec, kind)
  local c = rec.child
  c.sent = (c.sent or 0) + 1
  local attempt = rec.attempt
  if kind == 'compensate' then attempt = rec.comp.attempt end
  ctx.dispatch[#ctx.dispatch + 1] = { step = spec.n, agent = '', kind = kind, attempt = attempt, completeBy = 0, needs = {},
    child = c.op, childId = c.id, sent = c.sent }
  touch(ctx, spec.n)
end

-- A running child is cancelled (the parent is undone or fails): the step keeps waiting for its notice.
local function child_cancel(ctx, spec, rec)
  if rec.child.op ~= 'start' then return false end
  rec.child.op = 'cancel'
  child_check(ctx, spec, rec, CHILD_FIRST_CHECK_MS)
  child_dispatch(ctx, spec, rec, 'run')
  return true
end

-- A child step's turn in the undo (U7): its child is undone; the step is compensating until the notice.
local function child_undo_begin(ctx, spec, rec)
  local comp = phase(rec, 'compensate')
  comp.attempt = comp.attempt + 1
  comp.startedAt = ctx.now
  comp.finishedAt, comp.error = nil, nil
  rec.status = 'compensating'
  rec.child.op = 'undo'
  rec.child.ended = nil
  child_check(ctx, spec, rec, CHILD_FIRST_CHECK_MS)
  child_dispatch(ctx, spec, rec, 'compensate')
  push_event(ctx, 'compensation_started', spec.n, comp.attempt, 'undoing child task ' .. rec.child.id)
end

-- Drives an undo one step further: while a step is in flight nothing starts (its result or its
-- complete-by comes first); then the compensation of the next step that may have taken effect
-- starts, or, when none is left, the task ends as `endAs` (compensated | cancelled).
local function next_compensation(ctx)
  local recs = recs_of(ctx)
  local best, bestRec = nil, nil
  for _, s in ipairs(plan_of(ctx)) do
    local rec = recs[s.n]
    if rec.status == 'processing' or rec.status == 'compensating' then return end
    -- A fan-out step's elements still in flight (a drain) are waited for too, whatever the step's status.
    if rec.fe and #rec.fe.live > 0 then return end
    -- A child step still waiting is having its child cancelled: its notice comes first (U2).
    if rec.status == 'waiting' and s.k == 'c' then return end
    if (type(s.c) == 'table' or s.k == 'c') and UNDOABLE[rec.status] and (rec.effect or 'none') ~= 'none' then
      if not best or undo_before(rec, bestRec) then best, bestRec = s, rec end
    end
  end
  if not best then
    finish_task(ctx, redis.call('HGET', ctx.taskKey, 'endAs') or 'compensated')
    return
  end
  if best.fe then
    fe_comp_begin(ctx, best, bestRec)
    return
  end
  if best.k == 'c' then
    child_undo_begin(ctx, best, bestRec)
    return
  end
  if maybe_queue(ctx, best, bestRec, 'compensate', 'compensation_started') then return end
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
    if rec.status == 'waiting' and s.k == 'c' then
      -- A running child is cancelled, and the undo waits for its notice (U2).
      if child_cancel(ctx, s, rec) then push_event(ctx, 'step_waiting', s.n, rec.attempt, 'cancelling child task ' .. rec.child.id .. ': the task is being undone') end
    elseif rec.status == 'sleeping' or rec.status == 'waiting' then
      -- A sleep or a wait stops at once (decision 0019 U1): nothing ran, nothing to undo (effect none).
      local what = rec.status == 'sleeping' and 'stopped sleeping' or 'stopped waiting for signal ' .. s.ws.s
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, nil, what .. ': the task is being undone')
      touch(ctx, s.n)
    -- Parked, or reported failed with its retry not yet decided: no attempt of it is in flight.
    elseif rec.status == 'queued' then
      -- Waiting for a limit (decision 0020 Q8): no attempt in flight; its ticket leaves the line.
      drop_ticket(ctx, rec)
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, (rec.attempt or 0) > 0 and rec.attempt or nil, 'stopped waiting for a limit: the task is being undone')
      touch(ctx, s.n)
    elseif rec.status == 'parked' or (rec.status == 'processing' and rec.reported) then
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, rec.attempt, 'not running when the task began to be undone' .. (rec.error and (': ' .. rec.error) or ''))
      touch(ctx, s.n)
    elseif rec.fe and #rec.fe.live > 0 then
      -- A fan-out step (U4): its parked elements are abandoned, those in flight drain, pending ones never start.
      fe_stop_idle(ctx, s, rec, 'not running when the task began to be undone')
      fe_settle(ctx, s, rec)
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
  if spec.fs then
    local sspec, srec = fe_left(ctx, spec, rec)
    fe_settle(ctx, sspec, srec)
  end
  next_compensation(ctx)
end

-- A task that fails (onFailure=error) stops every other step: those in flight or parked are abandoned
-- (a late result is stale; an operator's retry of the task starts them again).
local function abandon_in_flight(ctx, reason)
  local recs = recs_of(ctx)
  for _, s in ipairs(plan_of(ctx)) do
    local rec = recs[s.n]
    -- A fan-out step's elements in flight or parked are abandoned with it (the step that gave up too).
    if rec.fe and #rec.fe.live > 0 then fe_stop_idle(ctx, s, rec, reason, true) end
    if rec.status == 'waiting' and s.k == 'c' then
      -- A running child is cancelled too (decision 0019 §2.7): the step is abandoned, its check stays
      -- until the child's notice says how it ended (and so what the step may have done).
      child_cancel(ctx, s, rec)
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      note_effect(rec, 'unknown')
      push_event(ctx, 'step_abandoned', s.n, rec.attempt, 'cancelling child task ' .. rec.child.id .. ': ' .. reason)
      touch(ctx, s.n)
    elseif rec.status == 'processing' or rec.status == 'parked' or rec.status == 'sleeping' or rec.status == 'waiting' or rec.status == 'queued' then
      if rec.status == 'processing' and not rec.reported and not rec.fe then note_effect(rec, 'unknown') end
      local why = reason
      if rec.status == 'queued' then
        drop_ticket(ctx, rec)
        why = 'stopped waiting for a limit: ' .. reason
      elseif rec.status == 'sleeping' then why = 'stopped sleeping: ' .. reason
      elseif rec.status == 'waiting' then why = 'stopped waiting for signal ' .. s.ws.s .. ': ' .. reason end
      rec.status = 'abandoned'
      rec.finishedAt = ctx.now
      redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, s.n))
      push_event(ctx, 'step_abandoned', s.n, (rec.attempt or 0) > 0 and rec.attempt or nil, why)
      touch(ctx, s.n)
    end
  end
end

-- A run that gave up (a step's, or a fan-out element's) ends the task's run by its policy: undone
-- (onFailure=compensate), or failed with an alert naming `reason`. Returns the action taken.
local function fail_run(ctx, spec, ph, reason, lastError, permanent, alertAttempt)
  if redis.call('HGET', ctx.taskKey, 'onFailure') == 'compensate' then
    begin_undo(ctx, 'compensated', reason)
    return 'compensate'
  end
  abandon_in_flight(ctx, reason)
  finish_task(ctx, 'failed', reason)
  record_alert(ctx, permanent and 'step_failed' or 'step_error', spec.n, ph.failureCount, lastError, alertAttempt or ph.attempt)
  return 'error'
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
  if spec.fs and kind == 'compensate' then
    -- An element's compensation (U6): no other element's starts; the step and the task end
    -- compensation_failed once none of the step's runs any more (its alert is recorded then).
    ph.parked = nil
    rec.status = 'compensation_failed'
    push_event(ctx, permanent and 'step_failed' or 'step_error', spec.n, ph.attempt, lastError)
    local sspec, srec = spec_of(ctx, spec.fs), recs_of(ctx)[spec.fs]
    srec.fe.compRunning = srec.fe.compRunning - 1
    srec.fe.compFailed = (srec.fe.compFailed or 0) + 1
    fe_comp_fill(ctx, sspec, srec)
    return 'error'
  elseif spec.fs then
    -- An element gives up (R13): so does its step — `step ship element 3 failed 4 times: …` — and the
    -- task follows its onFailure; the step's other elements in flight drain (an undo) or are abandoned.
    rec.status = permanent and 'failed' or 'error'
    push_event(ctx, permanent and 'step_failed' or 'step_error', spec.n, ph.attempt, lastError)
    local _, srec = fe_left(ctx, spec, rec)
    srec.status = rec.status
    srec.finishedAt = ctx.now
    srec.error = lastError
    return fail_run(ctx, spec, ph, 'step ' .. spec.fs .. ' element ' .. spec.item .. ' ' .. why, lastError, permanent, alertAttempt)
  end
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
  return fail_run(ctx, spec, ph, 'step ' .. spec.n .. ' ' .. why, lastError, permanent, alertAttempt)
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
    if maybe_queue(ctx, spec, rec, kind, 'step_retried', lastError) then return 'retry' end
    start_attempt(ctx, spec, rec, kind)
    push_event(ctx, 'step_retried', spec.n, ph.attempt, lastError)
    ph.error = nil -- the new attempt starts clean; the event above keeps the last error
    return 'retry'
  end
  if ph.giveUpAt and now + longBackoff >= ph.giveUpAt then
    return give_up(ctx, spec, rec, kind, 'gave up after ' .. n .. ' failures: no time for another attempt before its give-up time: ' .. lastError, lastError, false)
  end
  phase(rec, kind).parkedFor = 'backoff' -- why it is parked, for `triad status` (decision 0021 §3.2)
  park(ctx, spec, rec, kind, now + longBackoff, lastError)
  return 'park'
end

-- The task input's bytes for a condition (nil: the task has none), read once per transition.
local function task_input(ctx)
  if ctx.input == nil then
    local raw = redis.call('HGET', ctx.taskKey, 'input')
    ctx.input = (raw and raw ~= '') and raw or false
  end
  return ctx.input or nil
end

-- The list a fan-out step runs over (R10, R4): located in the task input or a step's output, at most
-- maxItems elements. Returns n, the elements' bytes and their n + 1 offsets; or nil and why not.
local function fe_list(ctx, spec)
  local fe = spec.fe
  local where = table.concat(fe.p, '.')
  local bytes
  if fe.s == '' then
    bytes = task_input(ctx)
    if not bytes then return nil, 'forEach: ' .. where .. ' is absent: the task has no input (expected a list)' end
  else
    where = fe.s .. (#fe.p > 0 and ('.' .. where) or '')
    bytes = redis.call('HGET', ctx.taskKey, 'o:' .. fe.s)
    if not bytes or bytes == '' then return nil, 'forEach: ' .. where .. ' is absent: step ' .. fe.s .. ' has no output (expected a list)' end
  end
  local what = fe.s == '' and 'the task input' or ('the output of ' .. fe.s)
  local pos, stop = mp_locate(bytes, 1, fe.p)
  if pos == nil then return nil, what .. ' is not valid msgpack at ' .. where .. ' (' .. stop .. ')' end
  if not pos then return nil, 'forEach: ' .. where .. ' is absent (expected a list)' end
  local n, first = mp_array(bytes, pos)
  if n == nil then return nil, what .. ' is not valid msgpack at ' .. where .. ' (' .. first .. ')' end
  if not n then
    local kind, v = mp_scalar(bytes, pos)
    return nil, 'forEach: ' .. where .. ' is ' .. when_render(kind, v) .. ', not a list'
  end
  if n > fe.m then return nil, 'forEach: ' .. where .. ' has ' .. n .. ' elements, above maxItems ' .. fe.m end
  local offsets = { struct.pack('>I4', 0) }
  local p = first
  for i = 1, n do
    local nxt, err = mp_skip(bytes, p, #fe.p + 1)
    if not nxt then return nil, what .. ' is not valid msgpack at ' .. where .. ' (' .. err .. ')' end
    p = nxt
    offsets[i + 1] = struct.pack('>I4', p - first)
  end
  return n, string.sub(bytes, first, stop - 1), table.concat(offsets)
end

-- Every element of a fan-out step is processed: so is the step, its output the array of theirs — unless
-- that array is over the message limit, which fails the step (R12). Returns true when it is processed.
local FE_MAX_OUTPUT = 1000000
local function fe_complete(ctx, spec, srec)
  local out = fe_output(ctx, spec, srec.fe.n)
  if #out > FE_MAX_OUTPUT then
    local why = 'the outputs of ' .. spec.n .. "'s " .. srec.fe.n .. ' elements total ' .. #out .. ' bytes, over the ' .. FE_MAX_OUTPUT .. '-byte message limit: return less from each element'
    srec.startFailures = (srec.startFailures or 0) + 1
    give_up(ctx, spec, srec, 'run', 'failed: ' .. why, why, true, 'output-' .. srec.startFailures)
    return false
  end
  srec.status = 'processed'
  srec.finishedAt = ctx.now
  srec.error = nil
  srec.order = redis.call('HINCRBY', ctx.taskKey, 'doneSeq', 1)
  redis.call('HSET', ctx.taskKey, 'o:' .. spec.n, out)
  push_event(ctx, 'step_done', spec.n, srec.attempt)
  touch(ctx, spec.n)
  return true
end

-- Element `espec` completed with `output` (R12): kept; while the task runs the next pending elements
-- start, and the step completes with the last one; during an undo the step settles when none is left in
-- flight. Returns true when the step was completed (the caller runs readiness).
local function fe_element_done(ctx, espec, erec, output, drain)
  erec.status = 'processed'
  erec.finishedAt = ctx.now
  erec.error = nil
  note_effect(erec, 'applied')
  erec.order = redis.call('HINCRBY', ctx.taskKey, 'doneSeq', 1)
  redis.call('HSET', ctx.taskKey, 'o:' .. espec.n, output)
  redis.call('ZREM', ctx.deadlinesKey, deadline_member(ctx.taskId, espec.n))
  push_event(ctx, 'step_done', espec.n, erec.attempt)
  touch(ctx, espec.n)
  local sspec, srec = fe_left(ctx, espec, erec)
  srec.fe.done = srec.fe.done + 1
  if drain then
    fe_settle(ctx, sspec, srec)
    return false
  end
  if srec.status ~= 'processing' then return false end
  fe_fill(ctx, sspec, srec)
  if srec.fe.done == srec.fe.n then return fe_complete(ctx, sspec, srec) end
  return false
end

-- A ready fan-out step starts (R10, R11) — or, when it ran before (an operator's retry), resumes: its
-- stopped elements start again with fresh budgets, processed ones stay, the list stays the one it
-- snapshotted. Returns 'done' (processed now: an empty list, or every element was), 'started', or nil
-- and why it cannot start (the step then fails for good).
local function fe_begin(ctx, spec, rec)
  if rec.fe then
    local fe = rec.fe
    elements_load(ctx, spec, fe.hi or 0)
    local recs = recs_of(ctx)
    local STOPPED = { failed = true, error = true, abandoned = true, parked = true }
    for i = 0, (fe.hi or 0) - 1 do
      local e = recs[element_name(spec.n, i)]
      if STOPPED[e.status] then
        e.status = 'pending'
        e.failureCount, e.circuitCount, e.giveUpAt, e.error, e.finishedAt = 0, 0, nil, nil, nil
        touch(ctx, element_name(spec.n, i))
      end
    end
    fe.next, fe.live = 0, {}
  else
    local n, list, offsets = fe_list(ctx, spec)
    if not n then return nil, list end
    redis.call('HSET', ctx.taskKey, 'fl:' .. spec.n, list, 'fo:' .. spec.n, offsets)
    ctx.lists = ctx.lists or {}
    ctx.lists[spec.n] = { list, offsets }
    rec.fe = { n = n, next = 0, hi = 0, live = {}, done = 0 }
  end
  -- The step's own attempt counts its starts (a condition decides only before the first).
  rec.attempt = (rec.attempt or 0) + 1
  rec.startedAt = rec.startedAt or ctx.now
  rec.finishedAt = nil
  rec.error = nil
  rec.status = 'processing'
  touch(ctx, spec.n)
  push_event(ctx, 'step_started', spec.n, nil, rec.fe.n .. ' elements, at most ' .. spec.fe.x .. ' at once')
  fe_fill(ctx, spec, rec)
  if rec.fe.done == rec.fe.n then
    if fe_complete(ctx, spec, rec) then return 'done' end
    return 'failed'
  end
  return 'started'
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

-- A child task's id (decision 0019 §5.1): `<parentId>:<step>:<attempt>`, or a digest when that is too long.
local function child_id(taskId, step, attempt)
  local id = taskId .. ':' .. step .. ':' .. attempt
  if #id <= 128 then return id end
  return 'child:' .. redis.sha1hex(taskId .. '/' .. step .. '/' .. attempt)
end

-- A child step's input (R14): nil for the parent's whole input (the caller sends it anyway); else the
-- bytes at the reference ('' when absent: the child gets no input); or nil and why the bytes cannot be read.
local function child_input(ctx, spec)
  local ch = spec.ch
  if ch.s == '' and not ch.p then return nil end
  local bytes, what
  if ch.s == '' then
    bytes, what = task_input(ctx), 'the task input'
  else
    bytes, what = redis.call('HGET', ctx.taskKey, 'o:' .. ch.s), 'the output of ' .. ch.s
  end
  if not bytes or bytes == '' then return '' end
  if not ch.p then return bytes end
  local pos, stop = mp_locate(bytes, 1, ch.p)
  if pos == nil then return nil, what .. ' is not valid msgpack at ' .. table.concat(ch.p, '.') .. ' (' .. stop .. ')' end
  if not pos then return '' end
  return string.sub(bytes, pos, stop - 1)
end

-- A ready child step starts (R14): a new attempt names a new child, which the caller creates.
local function child_start(ctx, spec, rec, input)
  rec.attempt = (rec.attempt or 0) + 1
  rec.startedAt = ctx.now
  rec.finishedAt, rec.error = nil, nil
  rec.status = 'waiting'
  rec.child = { id = child_id(ctx.taskId, spec.n, rec.attempt), op = 'start', sent = 0 }
  if spec.ch.t then rec.child.timeoutAt = ctx.now + spec.ch.t end
  if input then redis.call('HSET', ctx.taskKey, 'ci:' .. spec.n, input) end
  child_check(ctx, spec, rec, CHILD_FIRST_CHECK_MS)
  child_dispatch(ctx, spec, rec, 'run')
  push_event(ctx, 'step_waiting', spec.n, rec.attempt, 'child task ' .. rec.child.id .. ' (' .. spec.ch.w .. ')', nil, rec.child.timeoutAt)
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

--@lazy-end
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
          local holds, reason = true, nil
          if s.w then holds, reason = rare().step_condition(ctx, s, rec) end
          if holds == nil then
            rare().fail_at_start(ctx, s, rec, 'failed: its condition could not be evaluated: ' .. reason, reason)
            return false
          elseif holds and s.k == 's' then
            -- A durable sleep (R2-R4): a deadline in the index; one already due completes now.
            local wakeAt, why = rare().sleep_until(ctx, s)
            if not wakeAt then
              rare().fail_at_start(ctx, s, rec, 'failed: ' .. why, why)
              return false
            end
            rec.startedAt = ctx.now
            if wakeAt <= ctx.now then
              rare().complete_without_agent(ctx, s, rec)
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
            local queue = rare().signal_queue(ctx)
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
              rare().deliver_signal(ctx, s, rec, q.id, q.by, data)
              changed = true
            else
              rec.status = 'waiting'
              rec.timeoutAt = ctx.now + s.ws.t
              touch(ctx, s.n)
              redis.call('ZADD', ctx.deadlinesKey, rec.timeoutAt, deadline_member(ctx.taskId, s.n))
              push_event(ctx, 'step_waiting', s.n, nil, nil, nil, rec.timeoutAt, s.ws.s)
            end
          elseif holds and s.k == 'c' then
            -- A child task (R14): started by the caller; the step waits for its notice.
            local input, why = rare().child_input(ctx, s)
            if why then
              rare().fail_at_start(ctx, s, rec, 'failed: ' .. why, why)
              return false
            end
            rare().child_start(ctx, s, rec, input)
          elseif holds and s.fe then
            -- A fan-out (R10, R11, R4): elements start in index order, at most maxParallel at once.
            local started, why = rare().fe_begin(ctx, s, rec)
            if not started then
              rare().fail_at_start(ctx, s, rec, 'failed: ' .. why, why)
              return false
            elseif started == 'failed' then
              return false
            elseif started == 'done' then
              changed = true
            end
          elseif holds then
            if not maybe_queue(ctx, s, rec, 'run', 'step_started') then
              start_attempt(ctx, s, rec, 'run')
              push_event(ctx, 'step_started', s.n, rec.attempt)
            end
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
  local wf = redis.call('HMGET', taskKey, 'workflow', 'version', 'client', 'createdAt', 'replyTo', 'status', 'tags', 'parent', 'holdUntil')
  sync_search(ctx, wf[7], wf[4])
  notify_parent(ctx, wf[8], wf[9])
  body.workflow, body.version, body.client, body.createdAt = wf[1], tonumber(wf[2]), wf[3], tonumber(wf[4])
  if body.replyTo == nil then body.replyTo = wf[5] end
  if body.status == nil then body.status = wf[6] end
  body.events, body.dispatch = ctx.events, dispatch
  body.limiter = ctx.limiter
  local out = { code, cjson.encode(body) }
  if #dispatch > 0 then
    out[3] = redis.call('HGET', taskKey, 'input') or ''
    local seen = {}
    for _, d in ipairs(dispatch) do
      -- A fan-out element's request carries its value, under `=<step>#<i>` (no step name holds = or #).
      if d.item then
        out[#out + 1] = '=' .. rare().element_name(d.step, d.item)
        out[#out + 1] = rare().element_value(ctx, d.step, d.item)
      elseif d.child == 'start' then
        -- A child's input, when it is not the parent's whole input: under `=<step>` (decision 0019 §5.2).
        local ci = redis.call('HGET', taskKey, 'ci:' .. d.step)
        if ci then
          out[#out + 1] = '=' .. d.step
          out[#out + 1] = ci
        end
      end
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

--@lazy-imports rare
