--[[
  cancelTask — an operator stops a running task: no new step starts, steps in flight are abandoned
  (their late results are rejected by fencing), and the completed steps are compensated in reverse
  order of completion; the task ends `cancelled` once they are (or compensation_failed).

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease
  KEYS[5] compaction index
  ARGV[1] taskId  ARGV[2] reason  ARGV[3] now  ARGV[4] schedulerId  ARGV[5] the lease token
  ARGV[6] the lease duration (ms)

  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... }
          | { UNKNOWN_TASK, '{}' } | { INVALID_STATE, json{reason} } | { LEASE_BUSY, '{}' }
  Events: cancelled is preceded by compensating, compensation_started/_done for each compensation.
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local finished = { zset = KEYS[3], compact = KEYS[5] }
local taskId, now = ARGV[1], tonumber(ARGV[3])
if not take_lease(KEYS[4], ARGV[5], ARGV[6], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
now = task_now(taskKey, now)
local status = redis.call('HGET', taskKey, 'status')
if status ~= 'running' then
  return { INVALID_STATE, cjson.encode({ reason = 'the task is ' .. status .. '; only a running task can be cancelled' }) }
end
local lockEpoch = take_lock(taskKey, ARGV[4])
local plan = cjson.decode(redis.call('HGET', taskKey, 'plan'))
local events, dispatch = {}, {}
begin_undo(taskKey, deadlinesKey, finished, taskId, plan, now, events, dispatch, 'cancelled', ARGV[2])
return reply(OK, taskKey, { lockEpoch = lockEpoch, replyTo = redis.call('HGET', taskKey, 'replyTo'), events = events,
  dispatch = dispatch, status = redis.call('HGET', taskKey, 'status') }, dispatch)
