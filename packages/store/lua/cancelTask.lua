--[[
  cancelTask — an operator stops a running task: no new step starts, steps in flight are waited for
  (their result, or their complete-by), and then every step that may have taken effect is compensated,
  one at a time, in reverse order (decision 0009); the task ends `cancelled` once they are (or
  compensation_failed).

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease
  KEYS[5] compaction index   KEYS[6] the bucket's search index (decision 0021)
  ARGV[1] taskId  ARGV[2] reason  ARGV[3] now  ARGV[4] schedulerId  ARGV[5] the lease token
  ARGV[6] the lease duration (ms)
  ARGV[7] a bulk operation's id ('' = none)   ARGV[8] the status it acts on   ARGV[9] its snapshot time: with
  an id, the task is acted on once per operation (its `bo`), only if created at or before ARGV[9] and still
  in status ARGV[8] (decision 0021 §2.3); else { ALREADY_APPLIED | INVALID_STATE, json{reason} }

  ARGV[10] the limited table (JSON, '' = none; decision 0020): the undo's first compensation may queue

  Returns { OK, json{lockEpoch, replyTo, events, dispatch, status}, input, needs... }
          | { UNKNOWN_TASK, '{}' } | { INVALID_STATE, json{reason} } | { LEASE_BUSY, '{}' }
  Events: compensating, then compensation_started/_done for each compensation, then cancelled.
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local taskId = ARGV[1]
if not take_lease(KEYS[4], ARGV[5], ARGV[6], true) then return { LEASE_BUSY, '{}' } end
if redis.call('EXISTS', taskKey) == 0 then return { UNKNOWN_TASK, '{}' } end
local refused, bo = op_fence(taskKey, ARGV[7], ARGV[8], ARGV[9])
if refused then return refused end
local status = redis.call('HGET', taskKey, 'status')
if status ~= 'running' then
  return { INVALID_STATE, cjson.encode({ reason = 'the task is ' .. status .. '; only a running task can be cancelled' }) }
end
local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[3], compact = KEYS[5], search = KEYS[6] }, taskId, task_now(taskKey, tonumber(ARGV[3])))
local lockEpoch = take_lock(taskKey, ARGV[4])
set_limited(ctx, ARGV[10])
begin_undo(ctx, 'cancelled', ARGV[2])
op_record(taskKey, bo)
flush(ctx)
return reply(OK, ctx, { lockEpoch = lockEpoch })
