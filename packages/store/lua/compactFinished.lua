--[[
  compactFinished — retention's first stage (decision 0007): rewrites up to ARGV[3] finished tasks whose
  finish time is at or before ARGV[2] into their compact record. Only tasks that can never be retried are
  in the compaction index (completed, compensated, cancelled: `finish_task` files them); a failed or
  compensation_failed task keeps its full record for `triad retry`. Fenced by the supervisor epoch like
  purgeFinished: a deposed leader's call is refused and changes nothing.

  One bucket per call (decision 0015): every key is the bucket's.
  KEYS[1] compaction index (zset by finishedAt)   KEYS[2] the bucket's epoch fence
  ARGV[1] the bucket's task key prefix ("triad:<ns>:{<ns>:bNN}:task:")   ARGV[2] cutoff (epoch ms)   ARGV[3] limit
  ARGV[4] epoch
  Returns { OK, compacted, skipped } | { STALE_EPOCH, current }
  (skipped: index entries whose task is gone, already compacted, or not in a compactable status.)

  The compact record (what src/task-view.ts reads back):
    kept as is   id, workflow, version, status, seq, createdAt, finishedAt, error, staleResults, client, tags, objs,
                 a child's link and output (parent, parentStep, parentKind, parentAttempt, out), o:<step>;
                 input only for compensated and cancelled tasks (it explains what was undone).
    dropped      plan (the pinned definition stays in triad:<ns>:{<ns>:wf}:wf:<name> as v:<version>), replyTo,
                 lockedBy, lockEpoch, onFailure, updatedAt (= finishedAt), endAs, doneSeq, and input of
                 completed tasks; per step completeBy and lockedBy (of the run and of the compensation).
    k:<step>     status|attempt|failureCount|startedAt|finishedAt, and for compensated/cancelled tasks
                 |order|compAttempt|compFailureCount|compStartedAt|compFinishedAt; times in ms since the
                 task's createdAt, an absent value empty, trailing empty values cut.
    e:<step>     the step's error, ce:<step> its compensation's error, when there is one.
    r:<step>     a skipped step's reason (decision 0019).
    c            "1": the record is compacted (format 1).
  The key is read, deleted and written again with HSET: Redis never turns a hashtable-encoded hash back
  into a listpack, but a new hash stays a listpack while every value is at most hash-max-listpack-value
  (64 B) and it has at most hash-max-listpack-entries (128) fields. A large input, output or error
  simply leaves that task's compact record a hashtable.

  The task keys are derived from the index here, as in purgeFinished (in the bucket's slot).
]]
--@include _common

local COMPACTABLE = { completed = true, compensated = true, cancelled = true }
-- A child task keeps its link to its parent's step phase and its output (decision 0019 §2.8): `triad status`
-- shows the link; a late operation of that step (a start its check re-sent) finds the child its own, not
-- a task that took the id, and the notice it answers with is the one the parent would have had.
local KEEP = { 'id', 'workflow', 'version', 'status', 'seq', 'createdAt', 'finishedAt', 'error', 'staleResults', 'client', 'tags', 'objs',
  'parent', 'parentStep', 'parentKind', 'parentAttempt', 'out' }

-- A whole number as text ('' when absent): cjson decodes numbers as doubles, and tostring would print
-- large ones in exponent form.
local function int(v)
  if type(v) ~= 'number' then return '' end
  return string.format('%.0f', v)
end

local function compact_step(rec, createdAt, withUndo)
  local since = function(t)
    if type(t) ~= 'number' then return '' end
    return int(t - createdAt)
  end
  local p = { rec.status or 'pending', int(rec.attempt or 0), int(rec.failureCount or 0), since(rec.startedAt), since(rec.finishedAt) }
  if withUndo then
    p[6] = int(rec.order)
    local c = rec.comp
    if type(c) == 'table' then
      p[7], p[8], p[9], p[10] = int(c.attempt or 0), int(c.failureCount or 0), since(c.startedAt), since(c.finishedAt)
    end
  end
  while #p > 3 and p[#p] == '' do p[#p] = nil end
  return table.concat(p, '|')
end

-- Compacts one task; false (and nothing changed) when there is nothing to compact.
local function compact_task(taskKey)
  local flat = redis.call('HGETALL', taskKey)
  if #flat == 0 then return false end
  local f = {}
  for i = 1, #flat, 2 do f[flat[i]] = flat[i + 1] end
  if f.c or not COMPACTABLE[f.status] or not f.plan then return false end
  local plan = cjson.decode(f.plan)
  local createdAt = tonumber(f.createdAt) or 0
  local withUndo = f.status ~= 'completed'

  local out = {}
  local function put(field, value)
    if value then
      out[#out + 1] = field
      out[#out + 1] = value
    end
  end
  for _, name in ipairs(KEEP) do put(name, f[name]) end
  if withUndo then put('input', f.input) end
  for _, s in ipairs(plan) do
    local raw = f['s:' .. s.n]
    local rec = raw and cjson.decode(raw) or { status = 'pending', attempt = 0, failureCount = 0 }
    put('k:' .. s.n, compact_step(rec, createdAt, withUndo))
    if type(rec.error) == 'string' then put('e:' .. s.n, rec.error) end
    if type(rec.reason) == 'string' then put('r:' .. s.n, rec.reason) end
    if type(rec.comp) == 'table' and type(rec.comp.error) == 'string' then put('ce:' .. s.n, rec.comp.error) end
    put('o:' .. s.n, f['o:' .. s.n])
  end
  put('c', '1')

  redis.call('DEL', taskKey)
  -- One HSET for any ordinary task; a very large workflow is written in slices (unpack's stack limit).
  for i = 1, #out, 400 do
    redis.call('HSET', taskKey, unpack(out, i, math.min(i + 399, #out)))
  end
  return true
end

local current = newer_epoch(KEYS[2], ARGV[4])
if current then return { STALE_EPOCH, current } end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local compacted = 0
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  if compact_task(ARGV[1] .. id) then compacted = compacted + 1 end
end
return { OK, compacted, #due - compacted }
