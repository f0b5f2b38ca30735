--[[
  signalTask — a signal for a task (decision 0019 §3.3): delivered to the step that waits for it, kept
  until a step of that name starts waiting, or refused with the reason. The signal id makes sending twice
  harmless: a repeat answers `duplicate` with the original step and writes nothing.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease
  KEYS[5] compaction index   KEYS[6] open alerts (hash)   KEYS[7] alert outbox (zset)
  KEYS[8] the bucket's search index (decision 0021)
  ARGV[1] taskId  ARGV[2] the signal's name  ARGV[3] signalId  ARGV[4] data (msgpack, '' = none)
  ARGV[5] now  ARGV[6] schedulerId  ARGV[7] the lease token  ARGV[8] the lease duration (ms)
  ARGV[9] the client the request's subject names ('' = namespace-wide: an operator)
  ARGV[10] the limited table (JSON, '' = none; decision 0020): a step the signal makes ready may queue

  In order:
    1. the task's lease (LEASE_BUSY: nothing written); no task, or another client's → UNKNOWN_TASK (the
       same answer: no existence oracle, decision 0017)
    2. the id seen before → `duplicate` (same name) or INVALID_STATE (another name)
    3. the task not running → INVALID_STATE
    4. no step of the plan waits for that name → INVALID_STATE, naming the signals it does wait for
    5. a step waiting for it (the first in plan order) → `delivered`: its output is the data, the steps
       after it start, the task may complete (R8)
    6. a step of that name still pending → `buffered` (at most 16 per task: BUFFER_FULL)
    7. else → INVALID_STATE: no step will wait for it any more
  Returns { OK, json{outcome, step, lockEpoch, events, dispatch, status, ...}, input, needs... } | { code, json{reason} }
  Writes per accepted signal `g:<id>` = { name, at, by, to } (to = '' while buffered), and while buffered
  `sq` (the queue) and `sd:<id>` (its data). Events: signal_received, then as readiness goes.
]]
--@include _common

local taskKey = KEYS[1]
local taskId, name, id, data = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local MAX_BUFFERED = 16

if not take_lease(KEYS[4], ARGV[7], ARGV[8], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
local meta = redis.call('HMGET', taskKey, 'client', 'status', 'workflow', 'version')
local client, status = meta[1], meta[2]
if ARGV[9] ~= '' and client ~= ARGV[9] then return { UNKNOWN_TASK, '{}' } end
local by = ARGV[9] ~= '' and ('client:' .. ARGV[9]) or 'operator'

local function refuse(code, reason) return { code, cjson.encode({ reason = reason }) } end

local seen = redis.call('HGET', taskKey, 'g:' .. id)
if seen then
  local g = cjson.decode(seen)
  if g.name ~= name then
    return refuse(INVALID_STATE, 'signal id ' .. id .. ' was already used for signal "' .. g.name .. '"; use a new id')
  end
  local body = { outcome = 'duplicate', taskId = taskId, name = name, signalId = id, events = {}, dispatch = {} }
  if g.to ~= '' then body.step = g.to end
  return { OK, cjson.encode(body) }
end

if status ~= 'running' then
  if status == 'compensating' then
    return refuse(INVALID_STATE, 'task ' .. taskId .. ' is being undone: signals are accepted only while a task is running')
  end
  return refuse(INVALID_STATE, 'task ' .. taskId .. ' is ' .. status .. ': signals are accepted only while a task is running')
end

local ctx = new_ctx(taskKey, KEYS[2], { zset = KEYS[3], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, tonumber(ARGV[5])))
set_limited(ctx, ARGV[10])
ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
local plan, recs = plan_of(ctx), recs_of(ctx)
local names, waiting, pending, past = {}, nil, nil, nil
for _, s in ipairs(plan) do
  if s.k == 'w' then
    local known = false
    for _, n in ipairs(names) do if n == s.ws.s then known = true end end
    if not known then names[#names + 1] = s.ws.s end
    if s.ws.s == name then
      local st = recs[s.n].status
      if st == 'waiting' and not waiting then waiting = s
      elseif st == 'pending' and not pending then pending = s
      elseif not past then past = s end
    end
  end
end
if #names == 0 and not waiting then
  return refuse(INVALID_STATE, 'workflow ' .. meta[3] .. '@' .. meta[4] .. ' has no step waiting for signal "' .. name .. '" (it waits for no signal)')
end
if not waiting and not pending and not past then
  return refuse(INVALID_STATE, 'workflow ' .. meta[3] .. '@' .. meta[4] .. ' has no step waiting for signal "' .. name .. '" (its signals: ' .. table.concat(names, ', ') .. ')')
end

local body = { taskId = taskId, name = name, signalId = id }
if waiting then
  local lockEpoch = take_lock(taskKey, ARGV[6])
  redis.call('HSET', taskKey, 'updatedAt', ctx.now, 'g:' .. id, cjson.encode({ name = name, at = ctx.now, by = by, to = waiting.n }))
  deliver_signal(ctx, waiting, recs[waiting.n], id, by, data)
  if start_ready(ctx) then finish_task(ctx, 'completed') end
  flush(ctx)
  body.outcome, body.step, body.lockEpoch = 'delivered', waiting.n, lockEpoch
  return reply(OK, ctx, body)
end

if pending then
  local queue = signal_queue(ctx)
  if #queue >= MAX_BUFFERED then
    return refuse(BUFFER_FULL, 'task ' .. taskId .. ' already holds ' .. #queue .. ' signals no step has consumed; send this one once step ' .. pending.n .. ' is waiting')
  end
  queue[#queue + 1] = { id = id, name = name, at = ctx.now, by = by }
  redis.call('HSET', taskKey, 'sq', cjson.encode(queue), 'g:' .. id, cjson.encode({ name = name, at = ctx.now, by = by, to = '' }), 'updatedAt', ctx.now)
  if data ~= '' then redis.call('HSET', taskKey, 'sd:' .. id, data) end
  push_event(ctx, 'signal_received', nil, nil, 'id ' .. id .. ' from ' .. by .. ' kept until step ' .. pending.n .. ' starts', nil, nil, name)
  body.outcome, body.lockEpoch = 'buffered', tonumber(redis.call('HGET', taskKey, 'lockEpoch'))
  return reply(OK, ctx, body)
end

return refuse(INVALID_STATE, 'no step of task ' .. taskId .. ' will wait for signal "' .. name .. '" any more (step ' .. past.n .. ' is ' .. recs[past.n].status .. ')')
