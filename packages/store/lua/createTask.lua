--[[
  createTask — records a submitted task and its steps, claims it, and starts the steps that are ready.

  KEYS[1] task hash        KEYS[2] tasks index (zset by createdAt)   KEYS[3] deadlines (zset by completeBy)
  KEYS[4] finished index (zset by finishedAt)   KEYS[5] the scheduler's task lease
  KEYS[6] compaction index (zset by finishedAt)   KEYS[7] open alerts (hash)   KEYS[8] alert outbox (zset)
  ARGV[1] taskId  ARGV[2] workflow  ARGV[3] version  ARGV[4] input (msgpack)  ARGV[5] replyTo ('' = none)
  ARGV[6] plan (JSON)  ARGV[7] now (epoch ms)  ARGV[8] schedulerId  ARGV[9] onFailure
  ARGV[10] the lease token   ARGV[11] the lease duration (ms)   ARGV[12] the task deadline, ms after now ('' = none)
  ARGV[13] the submitting client (from the submission's subject, decision 0010)
  ARGV[14] the submission's priority, 1–5 ('' = the default 3: nothing stored, decision 0020)
  KEYS[9] the bucket's search index   ARGV[15] the task's tags, canonical JSON ('' = none; decision 0021):
  a tagged task's members (each tag, its status, workflow and client) enter the search index
  ARGV[16] the object names the task owns from the start, JSON array ('' = none: its input is inline;
  decision 0021 §4.6): stored as `objs`, which retention returns so the objects go with the task
  ARGV[17] the limited table (JSON, '' = none; decision 0020 §1.9): a ready step whose agent type is in it
  is queued for that limiter instead of started (the reply's `limiter` lists its queue item)

  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... }
          { EXISTS, json{status, client} } when the task id was already submitted (a duplicate is harmless;
          the caller refuses one from another client).
          { LEASE_BUSY, '{}' } when another scheduler holds the task's lease (nothing is written).
  Events: received, step_started*, step_skipped* (a `when` that is false), completed when every step was
  skipped; a step whose condition cannot be read (input bytes that are not msgpack) fails at once, and the
  task follows its onFailure (its alert recorded here: hence the alert keys, decision 0019 §2.5).
  With a deadline, the member `<taskId>|#task` enters the deadline index (expireTask.lua, decision 0009).
]]
--@include _common

local taskKey, tasksKey, deadlinesKey = KEYS[1], KEYS[2], KEYS[3]
local taskId, now = ARGV[1], tonumber(ARGV[7])

if not take_lease(KEYS[5], ARGV[10], ARGV[11], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 1 then
  local existing = redis.call('HMGET', taskKey, 'status', 'client')
  return { EXISTS, cjson.encode({ status = existing[1], client = existing[2] }) }
end

local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[4], compact = KEYS[6], search = KEYS[9] }, taskId, now)
ctx.alertsKey, ctx.outboxKey = KEYS[7], KEYS[8]
ctx.plan = cjson.decode(ARGV[6])
set_limited(ctx, ARGV[17])
local fields = { 'id', taskId, 'workflow', ARGV[2], 'version', ARGV[3], 'input', ARGV[4], 'replyTo', ARGV[5],
  'plan', ARGV[6], 'status', 'running', 'lockedBy', ARGV[8], 'lockEpoch', 1, 'seq', 0,
  'createdAt', now, 'updatedAt', now, 'onFailure', ARGV[9], 'client', ARGV[13] }
if ARGV[14] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'priority', ARGV[14] end
if (ARGV[16] or '') ~= '' then fields[#fields + 1], fields[#fields + 2] = 'objs', ARGV[16] end
local tagsJson = ARGV[15] or ''
if tagsJson ~= '' then
  fields[#fields + 1], fields[#fields + 2] = 'tags', tagsJson
  redis.call('ZADD', KEYS[9], unpack(rare().zadd_args(rare().search_members(cjson.decode(tagsJson), 'running', ARGV[2], ARGV[13], now, taskId))))
end
redis.call('HSET', taskKey, unpack(fields))
ctx.recs = {}
for _, s in ipairs(ctx.plan) do
  ctx.recs[s.n] = { status = 'pending', attempt = 0, failureCount = 0 }
  touch(ctx, s.n)
end
redis.call('ZADD', tasksKey, now, taskId)
if ARGV[12] ~= '' then
  local deadlineAt = now + tonumber(ARGV[12])
  redis.call('HSET', taskKey, 'deadlineAt', deadlineAt)
  redis.call('ZADD', deadlinesKey, deadlineAt, deadline_member(taskId, TASK_DEADLINE))
end

push_event(ctx, 'received', nil, nil, nil, 'running')
if start_ready(ctx) then finish_task(ctx, 'completed') end
flush(ctx)
return reply(OK, ctx, { lockEpoch = 1, replyTo = ARGV[5] })
