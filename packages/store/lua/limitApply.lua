--[[
  limitApply — what a transition asked of one agent type's limiter (decision 0020 §2.5), in this order:
  release permits (an attempt reported; a dead ticket; `requeue`: a late start goes back to its place),
  dequeue tickets (their phase moved on), pause (a throttled result's Retry-After), queue tickets; then
  the grant loop, unless `noGrant` (the supervisor's dequeues: grants are started by schedulers only).

  KEYS: the limiter's keys (_limiter.lua)
  ARGV[1] now (epoch ms)
  ARGV[2] JSON { release?: [ [ticket, requeue] ], dequeue?: [ticket], pause?: [{ k?: key (absent: the agent
          type), u: until }], queue?: [{ t: ticket, task, s: phase, c: kind, k: key, p: priority,
          f: firstAt, b: budgetMs }], noGrant?: true }

  Queueing is idempotent: a ticket already waiting stays where it is; one granted whose permit is live
  has its grant returned again; one whose permit expired unstarted goes back to its place.
  Returns JSON { grants: [{ ticket, taskId, phase, kind, completeBy, waitedMs }], wakeAt?, waiting, limited }.
]]
--@include _limiter

local now = lim_now(tonumber(ARGV[1]), true)
local ops = cjson.decode(ARGV[2])
local grants = {}

for _, r in ipairs(ops.release or {}) do
  local T, requeue = r[1], r[2] == true
  local rec = get_ticket(T)
  if rec and rec.g then
    remove_permit(T, rec, 'released')
    if requeue then
      enter_line(T, rec, now)
    else
      redis.call('HDEL', L.tickets, T)
      maybe_idle(rec.k)
    end
  elseif rec and not requeue then
    -- A dead ticket still waiting: it will never be started.
    leave_line(T, rec)
    redis.call('HDEL', L.tickets, T)
    maybe_idle(rec.k)
  end
end

for _, T in ipairs(ops.dequeue or {}) do
  local rec = get_ticket(T)
  if rec then
    if rec.g then remove_permit(T, rec, 'released') else leave_line(T, rec) end
    redis.call('HDEL', L.tickets, T)
    maybe_idle(rec.k)
  end
end

for _, p in ipairs(ops.pause or {}) do
  local untilTs = math.min(tonumber(p.u), now + MAX_PAUSE_MS)
  counter('throttled', 1)
  if type(p.k) == 'string' then
    local field = 'pause:' .. p.k
    if untilTs > ks_num(field) then redis.call('HSET', L.keyState, field, fmt(untilTs)) end
    if ks_num('w:' .. p.k) > 0 then block(p.k, untilTs) else maybe_idle(p.k) end
  elseif untilTs > tonumber(redis.call('HGET', L.state, 'pause') or '0') then
    redis.call('HSET', L.state, 'pause', fmt(untilTs))
  end
end

for _, q in ipairs(ops.queue or {}) do
  local T = q.t
  local rec = get_ticket(T)
  if rec and rec.g then
    local exp = tonumber(redis.call('ZSCORE', L.inflight, T))
    if exp and exp + GRACE_MS > now then
      grants[#grants + 1] = grant_record(T, rec)
    else
      remove_permit(T, rec, 'reclaimed')
      enter_line(T, rec, now)
    end
  elseif not rec then
    local seq = redis.call('HINCRBY', L.state, 'seq', 1)
    enter_line(T, { t = q.task, s = q.s, c = q.c, k = q.k, p = tonumber(q.p), f = tonumber(q.f), b = tonumber(q.b), q = seq }, now)
  end
end

local wakeAt
if ops.noGrant then
  housekeeping(now)
  if tonumber(redis.call('HGET', L.state, 'waiting') or '0') > 0 then wakeAt = now end
else
  wakeAt = grant_loop(now, grants)
end
return limiter_reply(grants, wakeAt)
