--[[
  _limiter — the dispatch limiter of one agent type (decision 0020 §1.6, §4): its waiting line, its
  permits and its rate and pause state, all in the agent type's own slot `{<ns>:lim:<agent>}`. Included
  by every limiter script; every key is in KEYS, in this order (LimitStore builds them, keys.ts):

  KEYS[1]  cfg       hash: the limit, compact — c (concurrency), ri (ms between grants at the rate), rb (burst),
                     k (key path JSON), kc, kri, kb (per key), pk ('1': a throttle pauses only its key); absent = no limit
  KEYS[2]  tickets   hash: ticket → JSON { t task, s phase, c kind, k key, p priority, f firstAt, b budgetMs,
                     q seq, l level and m line member while waiting, g completeBy once granted }
  KEYS[3]  line      zset, every score 0: one member per waiting ticket, <level>\0<key>\0<firstAt %015d>\0<seq %012d>\0<ticket>
  KEYS[4..8] ring:1..5  lists: per level, the keys with waiting tickets there, in turn order
  KEYS[9]  inring    hash: <level>\0<key> → 1 while that key is in that ring
  KEYS[10] promote   zset: waiting ticket (levels 2–5) → when it moves up one level
  KEYS[11] inflight  zset: granted ticket → its permit's expiry (the attempt's complete-by)
  KEYS[12] keyState  hash: in:<key> permits held, w:<key> tickets waiting, tat:<key> per-key GCRA, pause:<key> until
  KEYS[13] blocked   zset: keys out of turn → when to look again (+inf: until one of its permits ends)
  KEYS[14] idle      zset: keys with nothing waiting and no permit whose tat:/pause: may be dropped at that time
  KEYS[15] state     hash: now (monotonic clock), seq, tat, pause, wakeAt, counters waiting granted released reclaimed throttled
  KEYS[16] gps       hash: grants per epoch second, the last 60
  KEYS[17] waitIdx   zset: waiting ticket → firstAt (the oldest wait, for stats)

  Work per call is bounded (the caps below), so a call costs the same whatever the backlog.
]]
--@include _gcra

local GRACE_MS = 1000        -- PERMIT_GRACE_MS: a permit counts until its expiry + 1 s
local AGING_MS = 30000       -- PRIORITY_AGING_MS: a waiting ticket moves up one level every 30 s
local MAX_PAUSE_MS = 3600000 -- MAX_PAUSE_MS: a Retry-After pauses at most an hour
local RECLAIM_CAP, PROMOTE_CAP, UNBLOCK_CAP, IDLE_CAP, GRANT_CAP, POP_CAP = 128, 64, 64, 64, 64, 256
local INF = math.huge

local L = {
  cfg = KEYS[1], tickets = KEYS[2], line = KEYS[3], ring = { KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8] },
  inring = KEYS[9], promote = KEYS[10], inflight = KEYS[11], keyState = KEYS[12], blocked = KEYS[13],
  idle = KEYS[14], state = KEYS[15], gps = KEYS[16], waitIdx = KEYS[17],
}

-- A number written to Redis without losing its fraction (Lua's default is %.14g).
local function fmt(n)
  if n == INF then return '+inf' end
  if n == math.floor(n) then return string.format('%d', n) end
  return string.format('%.3f', n)
end

-- The limiter's clock: never behind the last `now` it saw (schedulers' clocks differ a little).
local function lim_now(argNow, write)
  local last = tonumber(redis.call('HGET', L.state, 'now') or '0')
  local now = argNow
  if last > now then now = last end
  if write then redis.call('HSET', L.state, 'now', fmt(now)) end
  return now
end

local function read_cfg()
  local v = redis.call('HMGET', L.cfg, 'c', 'ri', 'rb', 'kc', 'kri', 'kb', 'pk')
  return {
    c = tonumber(v[1]), ri = tonumber(v[2]), rb = tonumber(v[3]) or 1,
    kc = tonumber(v[4]), kri = tonumber(v[5]), kb = tonumber(v[6]) or 1, pk = v[7] == '1',
  }
end

local function counter(name, by) redis.call('HINCRBY', L.state, name, by or 1) end

local function get_ticket(T)
  local raw = redis.call('HGET', L.tickets, T)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function put_ticket(T, rec) redis.call('HSET', L.tickets, T, cjson.encode(rec)) end

-- A waiting ticket's level: its priority, one better for every AGING_MS it has waited, never above 1.
local function level_of(p, f, now)
  local l = p - math.floor((now - f) / AGING_MS)
  if l < 1 then l = 1 end
  if l > p then l = p end
  return l
end

local function member_of(l, key, f, q, T)
  return l .. '\0' .. key .. '\0' .. string.format('%015d', f) .. '\0' .. string.format('%012d', q) .. '\0' .. T
end

-- The ticket of a line member (level: 1 character; firstAt and seq: fixed widths).
local function ticket_of(member, key) return string.sub(member, #key + 33) end
local function first_at_of(member, key) return tonumber(string.sub(member, #key + 4, #key + 18)) end

-- The lexicographic range of a key's members at a level.
local function key_range(l, key) return '[' .. l .. '\0' .. key .. '\0', '(' .. l .. '\0' .. key .. '\1' end
local function level_range(l) return '[' .. l .. '\0', '(' .. l .. '\1' end

local function first_member(l, key)
  local lo, hi = key_range(l, key)
  return redis.call('ZRANGEBYLEX', L.line, lo, hi, 'LIMIT', 0, 1)[1]
end

local function ks_num(field) return tonumber(redis.call('HGET', L.keyState, field) or '0') end

local function is_blocked(key) return redis.call('ZSCORE', L.blocked, key) ~= false end

local function ring_push(l, key)
  if redis.call('HSETNX', L.inring, l .. '\0' .. key, 1) == 1 then redis.call('RPUSH', L.ring[l], key) end
end

-- A key back in turn: in the ring of every level where it has a waiting ticket.
local function unblock(key)
  redis.call('ZREM', L.blocked, key)
  for l = 1, 5 do
    if first_member(l, key) then ring_push(l, key) end
  end
end

local function block(key, untilTs)
  local s = redis.call('ZSCORE', L.blocked, key)
  local cur = s and (s == 'inf' and INF or tonumber(s)) or nil
  if cur == nil or untilTs > cur then redis.call('ZADD', L.blocked, fmt(untilTs), key) end
end

-- A key with nothing waiting and no permit: its GCRA and pause fields may go once they are in the past.
local function maybe_idle(key)
  if ks_num('w:' .. key) > 0 or ks_num('in:' .. key) > 0 then return end
  redis.call('HDEL', L.keyState, 'w:' .. key, 'in:' .. key)
  redis.call('ZREM', L.blocked, key)
  local v = redis.call('HMGET', L.keyState, 'tat:' .. key, 'pause:' .. key)
  local tat, pause = tonumber(v[1]), tonumber(v[2])
  if tat or pause then
    local at = math.max(tat or 0, pause or 0)
    redis.call('ZADD', L.idle, fmt(at), key)
  else
    redis.call('ZREM', L.idle, key)
  end
end

local function add_key_count(field, by)
  local n = redis.call('HINCRBY', L.keyState, field, by)
  if n <= 0 then redis.call('HDEL', L.keyState, field) end
end

-- Puts a ticket (new, or back at its place: its firstAt and seq kept) in the waiting line.
local function enter_line(T, rec, now)
  local l = level_of(rec.p, rec.f, now)
  local m = member_of(l, rec.k, rec.f, rec.q, T)
  rec.l, rec.m, rec.g = l, m, nil
  redis.call('ZADD', L.line, 0, m)
  redis.call('ZADD', L.waitIdx, fmt(rec.f), T)
  if l > 1 then redis.call('ZADD', L.promote, fmt(rec.f + (rec.p - l + 1) * AGING_MS), T) end
  put_ticket(T, rec)
  counter('waiting', 1)
  add_key_count('w:' .. rec.k, 1)
  redis.call('ZREM', L.idle, rec.k)
  if not is_blocked(rec.k) then ring_push(l, rec.k) end
end

-- Takes a waiting ticket out of the line (granted, dequeued or dead); its record stays to the caller.
local function leave_line(T, rec)
  redis.call('ZREM', L.line, rec.m)
  redis.call('ZREM', L.waitIdx, T)
  redis.call('ZREM', L.promote, T)
  counter('waiting', -1)
  add_key_count('w:' .. rec.k, -1)
  rec.l, rec.m = nil, nil
end

-- Permits this call reclaimed (expired unreleased): the reply says how many (triad_limit_reclaimed_total).
local reclaimed_now = 0

-- Ends a granted ticket's permit (if it is still held: a reclaimed one is not counted twice); a key
-- blocked on its per-key concurrency is back in turn.
local function remove_permit(T, rec, why)
  if redis.call('ZREM', L.inflight, T) == 1 then
    add_key_count('in:' .. rec.k, -1)
    counter(why, 1)
    if why == 'reclaimed' then reclaimed_now = reclaimed_now + 1 end
    local s = redis.call('ZSCORE', L.blocked, rec.k)
    if s == 'inf' or tonumber(s) == INF then unblock(rec.k) end
  end
end

local function earliest_live(now)
  local r = redis.call('ZRANGEBYSCORE', L.inflight, '(' .. fmt(now - GRACE_MS), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  return r[2] and tonumber(r[2]) or nil
end

local function grant_record(T, rec)
  return { ticket = T, taskId = rec.t, phase = rec.s, kind = rec.c, completeBy = rec.g, waitedMs = rec.g - rec.b - rec.f }
end

local function grant(T, rec, now, cfg, grants)
  local cb = now + rec.b
  redis.call('ZADD', L.inflight, fmt(cb), T)
  add_key_count('in:' .. rec.k, 1)
  leave_line(T, rec)
  if cfg.ri then
    local tat = tonumber(redis.call('HGET', L.state, 'tat') or '0')
    redis.call('HSET', L.state, 'tat', fmt(gcra_take(tat, now, cfg.ri)))
  end
  if cfg.kri then
    redis.call('HSET', L.keyState, 'tat:' .. rec.k, fmt(gcra_take(ks_num('tat:' .. rec.k), now, cfg.kri)))
  end
  rec.g = cb
  put_ticket(T, rec)
  counter('granted', 1)
  local sec = math.floor(now / 1000)
  redis.call('HINCRBY', L.gps, sec, 1)
  if redis.call('HLEN', L.gps) > 61 then
    for _, f in ipairs(redis.call('HKEYS', L.gps)) do
      if tonumber(f) <= sec - 60 then redis.call('HDEL', L.gps, f) end
    end
  end
  grants[#grants + 1] = grant_record(T, rec)
end

-- When a grant may next become possible with nothing else happening, while every waiting key is blocked.
local function blocked_wake(now)
  local at
  local r = redis.call('ZRANGEBYSCORE', L.blocked, '-inf', '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if r[2] then at = tonumber(r[2]) end
  if redis.call('ZCOUNT', L.blocked, '+inf', '+inf') > 0 then
    local e = earliest_live(now)
    if e and (at == nil or e + GRACE_MS < at) then at = e + GRACE_MS end
  end
  return at
end

-- Housekeeping every call does first: reclaim expired permits, promote tickets that aged, unblock keys
-- whose time came, drop idle keys' fields. Each capped.
local function housekeeping(now)
  for _, T in ipairs(redis.call('ZRANGEBYSCORE', L.inflight, '-inf', fmt(now - GRACE_MS), 'LIMIT', 0, RECLAIM_CAP)) do
    local rec = get_ticket(T)
    if rec then
      remove_permit(T, rec, 'reclaimed')
      redis.call('HDEL', L.tickets, T)
      maybe_idle(rec.k)
    else
      redis.call('ZREM', L.inflight, T)
    end
  end
  for _, T in ipairs(redis.call('ZRANGEBYSCORE', L.promote, '-inf', fmt(now), 'LIMIT', 0, PROMOTE_CAP)) do
    local rec = get_ticket(T)
    if rec and rec.m and not rec.g then
      redis.call('ZREM', L.line, rec.m)
      local l = level_of(rec.p, rec.f, now)
      rec.l, rec.m = l, member_of(l, rec.k, rec.f, rec.q, T)
      redis.call('ZADD', L.line, 0, rec.m)
      if l > 1 then redis.call('ZADD', L.promote, fmt(rec.f + (rec.p - l + 1) * AGING_MS), T)
      else redis.call('ZREM', L.promote, T) end
      put_ticket(T, rec)
      if not is_blocked(rec.k) then ring_push(l, rec.k) end
    else
      redis.call('ZREM', L.promote, T)
    end
  end
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', L.blocked, '-inf', fmt(now), 'LIMIT', 0, UNBLOCK_CAP)) do unblock(key) end
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', L.idle, '-inf', fmt(now), 'LIMIT', 0, IDLE_CAP)) do
    redis.call('ZREM', L.idle, key)
    if ks_num('w:' .. key) == 0 and ks_num('in:' .. key) == 0 then
      redis.call('HDEL', L.keyState, 'tat:' .. key, 'pause:' .. key)
    end
  end
end

--[[
  The grant loop (decision 0020 §4.3): the lowest level first, keys in turn within a level, first come
  first served within a key; at most GRANT_CAP grants and POP_CAP ring pops per call. Appends to
  `grants`; returns wakeAt — the earliest time a grant may become possible that no release will announce
  (a rate token, a pause's end, a permit's expiry + grace, a blocked key's time), `now` when it stopped
  at a cap, nil when nothing waits — and stores it in state.
]]
local function grant_loop(now, grants)
  housekeeping(now)
  local cfg = read_cfg()
  local tau = cfg.ri and (cfg.rb - 1) * cfg.ri or 0
  local ktau = cfg.kri and (cfg.kb - 1) * cfg.kri or 0
  local wakeAt, stopped, pops = nil, false, 0
  while #grants < GRANT_CAP and pops < POP_CAP do
    local pause = tonumber(redis.call('HGET', L.state, 'pause') or '0')
    if pause > now then wakeAt, stopped = pause, true break end
    if cfg.c and redis.call('ZCOUNT', L.inflight, '(' .. fmt(now - GRACE_MS), '+inf') >= cfg.c then
      local e = earliest_live(now)
      wakeAt, stopped = e and e + GRACE_MS or now, true
      break
    end
    if cfg.ri then
      local allowAt = gcra_allow_at(tonumber(redis.call('HGET', L.state, 'tat') or '0'), now, tau)
      if allowAt > now then wakeAt, stopped = allowAt, true break end
    end
    local l
    for i = 1, 5 do
      if redis.call('LLEN', L.ring[i]) > 0 then l = i break end
    end
    if not l then wakeAt, stopped = blocked_wake(now), true break end
    local key = redis.call('LPOP', L.ring[l])
    pops = pops + 1
    redis.call('HDEL', L.inring, l .. '\0' .. key)
    local first = first_member(l, key)
    if first and not is_blocked(key) then
      local blockUntil
      if cfg.kc and ks_num('in:' .. key) >= cfg.kc then blockUntil = INF
      elseif cfg.kri then
        local a = gcra_allow_at(ks_num('tat:' .. key), now, ktau)
        if a > now then blockUntil = a end
      end
      if not blockUntil then
        local kp = ks_num('pause:' .. key)
        if kp > now then blockUntil = kp end
      end
      if blockUntil then
        block(key, blockUntil)
      else
        local lo, hi = key_range(l, key)
        if redis.call('ZLEXCOUNT', L.line, lo, hi) > 1 then ring_push(l, key) end
        local T = ticket_of(first, key)
        local rec = get_ticket(T)
        if rec and rec.m == first then grant(T, rec, now, cfg, grants)
        else redis.call('ZREM', L.line, first) end
      end
    end
  end
  if not stopped then wakeAt = now end
  if tonumber(redis.call('HGET', L.state, 'waiting') or '0') <= 0 then wakeAt = nil end
  if wakeAt then
    wakeAt = math.ceil(wakeAt)
    redis.call('HSET', L.state, 'wakeAt', fmt(wakeAt))
  else
    redis.call('HDEL', L.state, 'wakeAt')
  end
  return wakeAt
end

-- The reply of every script that may grant: the grants to start, wakeAt, and whether a limit is set.
local function limiter_reply(grants, wakeAt)
  local out = { grants = grants, waiting = tonumber(redis.call('HGET', L.state, 'waiting') or '0'), limited = redis.call('EXISTS', L.cfg) == 1 }
  if wakeAt then out.wakeAt = wakeAt end
  if reclaimed_now > 0 then out.reclaimed = reclaimed_now end
  return cjson.encode(out)
end
