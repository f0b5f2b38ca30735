--[[
  takeParentNotice — the leader supervisor takes a finished child task's notice (its member
  `<childId>|#parent` in the child's deadline index, written by the transition that finished it; decision
  0019 §5.3) for delivery to its parent: it reads the child's end and its link, and moves the member
  `retry ms` ahead, so a leader that dies before dropParentNotice leaves it for the next one.

  KEYS[1] child task hash   KEYS[2] deadlines   KEYS[3] the bucket's epoch fence
  ARGV[1] childId  ARGV[2] now  ARGV[3] epoch  ARGV[4] retry ms

  Returns { OK, json{action: 'deliver', parent, step, kind, attempt, status, error, workflow, score}, out }
          | { OK, json{action: 'none'} } (no task, no link, or not finished: the member is dropped)
          | { STALE_EPOCH, json{epoch} }
]]
--@include _common

local taskKey, deadlinesKey = KEYS[1], KEYS[2]
local member = ARGV[1] .. '|' .. PARENT_NOTICE
local current = newer_epoch(KEYS[3], ARGV[3])
if current then return { STALE_EPOCH, cjson.encode({ epoch = current }) } end
local f = redis.call('HMGET', taskKey, 'status', 'parent', 'parentStep', 'parentKind', 'parentAttempt', 'error', 'workflow', 'out')
local ENDED = { completed = true, failed = true, compensated = true, compensation_failed = true, cancelled = true }
if not f[1] or not f[2] or not ENDED[f[1]] then
  redis.call('ZREM', deadlinesKey, member)
  return { OK, cjson.encode({ action = 'none' }) }
end
local score = tonumber(ARGV[2]) + tonumber(ARGV[4])
redis.call('ZADD', deadlinesKey, score, member)
return { OK, cjson.encode({ action = 'deliver', parent = f[2], step = f[3], kind = f[4], attempt = tonumber(f[5]), status = f[1],
  error = f[6] or '', workflow = f[7] or '', score = score }), f[8] or '' }
