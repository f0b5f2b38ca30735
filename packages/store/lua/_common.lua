-- Shared fragment, inlined by the loader wherever a script says --@include _common.
-- Return codes (mirrored by ScriptCode in src/codes.ts).
local OK, EXISTS, UNKNOWN_TASK, STALE, INVALID_STATE, VERSION_CONFLICT, UNKNOWN_STEP, STALE_EPOCH, LEASE_BUSY = 0, 1, 2, 3, 4, 5, 6, 7, 8

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

local function save_step(taskKey, name, rec)
  redis.call('HSET', taskKey, 's:' .. name, cjson.encode(rec))
end

-- Appends an event; the per-task sequence number is assigned here, atomically with the transition.
local function push_event(taskKey, events, etype, step, attempt, reason, status)
  local seq = redis.call('HINCRBY', taskKey, 'seq', 1)
  events[#events + 1] = { type = etype, seq = seq, step = step, attempt = attempt, reason = reason, status = status }
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

local function deadline_member(taskId, name)
  return taskId .. '|' .. name
end

-- Starts every pending step whose dependencies are all processed. Fills `dispatch` with what the
-- caller must send to agents and `events` with step_started. Returns true when every step is processed.
local function start_ready(taskKey, deadlinesKey, taskId, plan, now, events, dispatch)
  local status = load_steps(taskKey, plan)
  local all_done = true
  for _, s in ipairs(plan) do
    local rec = status[s.n]
    if rec.status ~= 'processed' then all_done = false end
    if rec.status == 'pending' then
      local ready = true
      for _, d in ipairs(s.d) do
        if status[d].status ~= 'processed' then ready = false break end
      end
      if ready then
        rec.status = 'processing'
        rec.attempt = rec.attempt + 1
        rec.completeBy = now + s.b
        rec.startedAt = now
        rec.lockedBy = nil
        save_step(taskKey, s.n, rec)
        redis.call('ZADD', deadlinesKey, rec.completeBy, deadline_member(taskId, s.n))
        push_event(taskKey, events, 'step_started', s.n, rec.attempt)
        dispatch[#dispatch + 1] = { step = s.n, agent = s.a, kind = 'run', attempt = rec.attempt, completeBy = rec.completeBy, needs = s.nd }
      end
    end
  end
  return all_done
end

local function find_spec(plan, name)
  for _, s in ipairs(plan) do if s.n == name then return s end end
  return nil
end

-- Marks the task finished and files it for retention: in the finished index, and, when it can never
-- be retried (completed, compensated, cancelled; `retryStep` takes only failed and compensation_failed
-- ones), in the compaction index that retention reads in O(due) (compactFinished.lua, decision 0007).
-- `finished` holds both index keys, as the calling script received them in KEYS: { zset = …, compact = … }.
local function finish_task(taskKey, finished, taskId, status, now, events, reason)
  redis.call('HSET', taskKey, 'status', status, 'finishedAt', now, 'updatedAt', now)
  if reason then redis.call('HSET', taskKey, 'error', reason) end
  redis.call('ZADD', finished.zset, now, taskId)
  if status == 'completed' or status == 'compensated' or status == 'cancelled' then
    redis.call('ZADD', finished.compact, now, taskId)
  end
  push_event(taskKey, events, status, nil, nil, reason, status)
end

-- Starts a new attempt of a step's compensation (a first one, a retry, or an operator's resubmission):
-- new complete-by in the deadline index, and the request for the caller to send. `resetFailures` is
-- false for the supervisor's retries (the failure already counted stays counted).
local function start_compensation_attempt(taskKey, deadlinesKey, taskId, spec, rec, now, dispatch, resetFailures)
  local comp = rec.comp or { attempt = 0, failureCount = 0 }
  comp.attempt = comp.attempt + 1
  if resetFailures then comp.failureCount = 0 end
  comp.completeBy = now + spec.c.b
  comp.startedAt = now
  comp.finishedAt = nil
  comp.parked = nil
  rec.comp = comp
  rec.status = 'compensating'
  redis.call('ZADD', deadlinesKey, comp.completeBy, deadline_member(taskId, spec.n))
  dispatch[#dispatch + 1] = { step = spec.n, agent = spec.c.a, kind = 'compensate', attempt = comp.attempt, completeBy = comp.completeBy, needs = { spec.n } }
  return comp
end

-- Starts the compensation of the most recently completed step that has one, or, when none is left,
-- ends the task as `endAs` (compensated | cancelled). Compensations run one at a time, in reverse
-- order of completion.
local function next_compensation(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch)
  local best, bestRec, bestOrder = nil, nil, -1
  local recs = load_steps(taskKey, plan)
  for _, s in ipairs(plan) do
    if type(s.c) == 'table' then
      local rec = recs[s.n]
      if rec.status == 'processed' and (rec.order or 0) > bestOrder then
        best, bestRec, bestOrder = s, rec, rec.order or 0
      end
    end
  end
  if not best then
    local endAs = redis.call('HGET', taskKey, 'endAs') or 'compensated'
    finish_task(taskKey, finished, taskId, endAs, now, events)
    return
  end
  local comp = start_compensation_attempt(taskKey, deadlinesKey, taskId, best, bestRec, now, dispatch, true)
  comp.error = nil
  save_step(taskKey, best.n, bestRec)
  push_event(taskKey, events, 'compensation_started', best.n, comp.attempt)
end

-- Begins undoing a task: nothing new starts, steps in flight are abandoned (their late results are
-- rejected by fencing), and the completed steps are compensated in reverse order of completion.
local function begin_undo(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch, endAs, reason)
  redis.call('HSET', taskKey, 'status', 'compensating', 'endAs', endAs, 'updatedAt', now)
  if reason then redis.call('HSET', taskKey, 'error', reason) end
  local recs = load_steps(taskKey, plan)
  for _, s in ipairs(plan) do
    local rec = recs[s.n]
    if rec.status == 'processing' or rec.status == 'parked' then
      rec.status = 'abandoned'
      rec.finishedAt = now
      save_step(taskKey, s.n, rec)
      redis.call('ZREM', deadlinesKey, deadline_member(taskId, s.n))
    end
  end
  push_event(taskKey, events, 'compensating', nil, nil, reason, 'compensating')
  next_compensation(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch)
end

-- The reply: { code, json{...}, input, name1, output1, ... } — binary values stay out of the JSON.
local function reply(code, taskKey, body, dispatch)
  local wf = redis.call('HMGET', taskKey, 'workflow', 'version')
  body.workflow, body.version = wf[1], tonumber(wf[2])
  local out = { code, cjson.encode(body) }
  if dispatch and #dispatch > 0 then
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
