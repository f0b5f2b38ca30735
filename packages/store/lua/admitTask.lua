--[[
  admitTask — starts a task that waited for admission and was admitted by the transition that ended
  another task of its client in its bucket (decision 0024): its ready steps start as createTask would have
  started them. Run by the scheduler that ran that transition (under the task's lease), or by the leader
  supervisor when the member `<taskId>|#admit` falls due in the deadline index (fenced by its epoch).
  Started at most once: only a task whose `adm` is 'a' starts, and the start deletes it and the member.

  KEYS[1] task hash   KEYS[2] deadlines   KEYS[3] finished index   KEYS[4] the scheduler's task lease, or
  (the supervisor) the bucket's epoch fence   KEYS[5] compaction index   KEYS[6] open alerts (hash)
  KEYS[7] alert outbox (zset)   KEYS[8] the bucket's search index
  ARGV[1] taskId  ARGV[2] now  ARGV[3] schedulerId ('' = the supervisor)  ARGV[4] the lease token, or the
  supervisor's epoch  ARGV[5] the lease duration (ms)  ARGV[6] the limited table (JSON, '' = none)

  Returns { OK, json{action = 'admit', kind, lockEpoch, replyTo, events, dispatch, status, ...}, input, needs... }
          { INVALID_STATE, json{reason} } (not admitted, already started, or ended: the member is dropped)
          | { UNKNOWN_TASK, '{}' } | { LEASE_BUSY, '{}' } | { STALE_EPOCH, json{epoch} }
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local taskId = ARGV[1]
local member = deadline_member(taskId, ADMIT_NOTICE)
local bySupervisor = ARGV[3] == ''
if bySupervisor then
  local refused = supervisor_guard(taskKey, deadlinesKey, KEYS[4], ARGV[4], member)
  if refused then return refused end
else
  if not take_lease(KEYS[4], ARGV[4], ARGV[5], true) then return { LEASE_BUSY, '{}' } end
  if redis.call('EXISTS', taskKey) == 0 then
    redis.call('ZREM', deadlinesKey, member)
    return { UNKNOWN_TASK, '{}' }
  end
end
local f = redis.call('HMGET', taskKey, 'adm', 'status')
if f[1] ~= 'a' or f[2] ~= 'running' then
  redis.call('ZREM', deadlinesKey, member)
  return { INVALID_STATE, cjson.encode({ reason = 'the task is ' .. tostring(f[2]) .. (f[1] == 'w' and ', waiting for admission' or ', not waiting to be started') }) }
end
redis.call('ZREM', deadlinesKey, member)
redis.call('HDEL', taskKey, 'adm')
local ctx = new_ctx(taskKey, deadlinesKey, { zset = KEYS[3], compact = KEYS[5], search = KEYS[8] }, taskId, task_now(taskKey, tonumber(ARGV[2])))
ctx.alertsKey, ctx.outboxKey = KEYS[6], KEYS[7]
local lockEpoch = bySupervisor and tonumber(redis.call('HGET', taskKey, 'lockEpoch')) or take_lock(taskKey, ARGV[3])
set_limited(ctx, ARGV[6])
redis.call('HSET', taskKey, 'updatedAt', ctx.now)
if start_ready(ctx) then finish_task(ctx, 'completed') end
flush(ctx)
return reply(OK, ctx, { lockEpoch = lockEpoch, action = 'admit', kind = 'run' })
