-- Shared fragment (decision 0024): admission of a client's tasks, per bucket. Inlined by _common.
-- A client's tasks of one bucket that have started and not ended are the members of the set
-- `<bucket>adm:a:<client>`; once it holds as many as the bucket's share of the client's cap, a new task is
-- stored but not started: it waits in `<bucket>adm:w:<client>` (zset by arrival) until one of the set ends,
-- and the ending transition admits it (set member, field `adm` = 'a', deadline member `<id>|#admit`), which
-- admitTask.lua starts — called at once by the scheduler that ran the ending transition, else by the leader
-- supervisor when the member falls due. Every change is made by the transition that changes the task's
-- status, in the task's own slot: nothing to recount after a crash.

-- The deadline index member of an admitted task not yet started.
local ADMIT_NOTICE = '#admit'
-- How long a scheduler has to start what its transition admitted before the supervisor does (ms).
local ADMIT_GRACE_MS = 5000

-- The bucket's key prefix (`triad:<ns>:{<ns>:bNN}:`), from the task's key `<prefix>task:<taskId>`.
local function bucket_prefix(ctx)
  return string.sub(ctx.taskKey, 1, #ctx.taskKey - #ctx.taskId - 5)
end

local function admission_keys(ctx, client)
  local p = bucket_prefix(ctx) .. 'adm:'
  return p .. 'a:' .. client, p .. 'w:' .. client, p .. 'c:' .. client
end

-- createTask's check: nil when the task may start (it joins the set; nothing is read or written with no
-- cap), else the reason it waits (it joined the queue). `cap`: the client's share per bucket ('' / 0 = none).
local function admission_take(ctx, client, cap)
  cap = tonumber(cap)
  if not cap or cap <= 0 then return nil end
  local activeKey, waitKey, capKey = admission_keys(ctx, client)
  local n = redis.call('SCARD', activeKey)
  if n < cap then
    redis.call('SADD', activeKey, ctx.taskId)
    return nil
  end
  redis.call('ZADD', waitKey, ctx.now, ctx.taskId)
  redis.call('SET', capKey, cap)
  redis.call('HSET', ctx.taskKey, 'adm', 'w')
  return 'waiting for admission: client ' .. client .. ' has ' .. n .. ' active tasks in this task\'s bucket (its share of the cap: ' .. cap .. ')'
end

-- Admits the oldest waiting tasks of the client while the set holds fewer than the cap the queue was
-- built with; the ids go to ctx.admit (the reply's `admit`: the caller starts them with admitTask).
local function admission_fill(ctx, activeKey, waitKey, capKey)
  local cap = tonumber(redis.call('GET', capKey) or '1')
  local n = redis.call('SCARD', activeKey)
  local prefix = bucket_prefix(ctx) .. 'task:'
  while n < cap do
    local head = redis.call('ZPOPMIN', waitKey)
    if #head == 0 then break end
    local id = head[1]
    redis.call('SADD', activeKey, id)
    redis.call('HSET', prefix .. id, 'adm', 'a')
    redis.call('ZADD', ctx.deadlinesKey, ctx.now + ADMIT_GRACE_MS, deadline_member(id, ADMIT_NOTICE))
    if not ctx.admit then ctx.admit = {} end
    ctx.admit[#ctx.admit + 1] = id
    n = n + 1
  end
end

-- A task that ended in this transition (ctx.finishedNow) leaves its client's set, and the next waiting
-- task takes its place; one that ended while it waited leaves the queue. `client`: the task's field, read
-- by the caller with what it reads anyway. A plain task: two calls (SREM, ZCARD); one not counted: SREM, ZREM.
local function admission_end(ctx, client)
  if not ctx.finishedNow or not client or client == '' or ctx.admissionDone then return end
  ctx.admissionDone = true
  local activeKey, waitKey, capKey = admission_keys(ctx, client)
  if redis.call('SREM', activeKey, ctx.taskId) == 1 then
    if redis.call('ZCARD', waitKey) > 0 then admission_fill(ctx, activeKey, waitKey, capKey) end
  elseif redis.call('ZREM', waitKey, ctx.taskId) == 1 then
    redis.call('HDEL', ctx.taskKey, 'adm')
  end
end
