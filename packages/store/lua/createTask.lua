--[[
  createTask — records a submitted task and its steps, claims it, and starts the steps that are ready.

  KEYS[1] task hash        KEYS[2] tasks index (zset by createdAt)   KEYS[3] deadlines (zset by completeBy)
  KEYS[4] finished index (zset by finishedAt)   KEYS[5] the scheduler's task lease
  KEYS[6] compaction index (zset by finishedAt)
  ARGV[1] taskId  ARGV[2] workflow  ARGV[3] version  ARGV[4] input (msgpack)  ARGV[5] replyTo ('' = none)
  ARGV[6] plan (JSON)  ARGV[7] now (epoch ms)  ARGV[8] schedulerId  ARGV[9] onFailure
  ARGV[10] the lease token   ARGV[11] the lease duration (ms)

  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... }
          { EXISTS, json{status} } when the task id was already submitted (duplicates are harmless).
          { LEASE_BUSY, '{}' } when another scheduler holds the task's lease (nothing is written).
  Events: received, step_started*, completed (a workflow of zero ready steps cannot exist).
]]
--@include _common

local taskKey, tasksKey, deadlinesKey = KEYS[1], KEYS[2], KEYS[3]
local finished = { zset = KEYS[4], compact = KEYS[6] }
local taskId, now = ARGV[1], tonumber(ARGV[7])

if not take_lease(KEYS[5], ARGV[10], ARGV[11], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 1 then
  return { EXISTS, cjson.encode({ status = redis.call('HGET', taskKey, 'status') }) }
end

local plan = cjson.decode(ARGV[6])
redis.call('HSET', taskKey,
  'id', taskId, 'workflow', ARGV[2], 'version', ARGV[3], 'input', ARGV[4], 'replyTo', ARGV[5],
  'plan', ARGV[6], 'status', 'running', 'lockedBy', ARGV[8], 'lockEpoch', 1, 'seq', 0,
  'createdAt', now, 'updatedAt', now, 'onFailure', ARGV[9])
for _, s in ipairs(plan) do
  save_step(taskKey, s.n, { status = 'pending', attempt = 0, failureCount = 0 })
end
redis.call('ZADD', tasksKey, now, taskId)

local events, dispatch = {}, {}
push_event(taskKey, events, 'received', nil, nil, nil, 'running')
if start_ready(taskKey, deadlinesKey, taskId, plan, now, events, dispatch) then
  finish_task(taskKey, finished, taskId, 'completed', now, events)
end
return reply(OK, taskKey, { lockEpoch = 1, replyTo = ARGV[5], events = events, dispatch = dispatch,
  status = redis.call('HGET', taskKey, 'status') }, dispatch)
