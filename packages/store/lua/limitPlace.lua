--[[
  limitPlace — a waiting ticket's place in its agent type's line (decision 0020 §4.4), read-only: the
  grants before it if nothing else arrived and no key were blocked — 1 + the tickets at lower levels + its
  rank among its key's tickets at its level + for each other key in its level's ring min(its tickets
  there, rank + 1 if that key comes before its key in the ring, else rank). Exact for rings of up to
  1,000 keys; beyond, the upper bound lower + rank × K + its key's position, marked approximate.

  With ARGV[2] (now, epoch ms) it also says until when a Retry-After pauses the agent type or the
  ticket's key (`pausedUntil`, the later of the two), so `triad status` can say "paused until …, then place n".

  KEYS: the limiter's keys (_limiter.lua)   ARGV[1] ticket   ARGV[2] now (optional)
  Returns JSON { found: false } | { granted: true, completeBy } | { place, approximate, level, key, blockedUntil?, pausedUntil? }
]]
--@include _limiter

local T = ARGV[1]
local rec = get_ticket(T)
if not rec then return cjson.encode({ found = false }) end
if rec.g then return cjson.encode({ found = true, granted = true, completeBy = rec.g }) end
local l, key = rec.l, rec.k
local lower = 0
for i = 1, l - 1 do
  local lo, hi = level_range(i)
  lower = lower + redis.call('ZLEXCOUNT', L.line, lo, hi)
end
local lo = key_range(l, key)
local rank = redis.call('ZLEXCOUNT', L.line, lo, '(' .. rec.m)
local n = redis.call('LLEN', L.ring[l])
local out = { found = true, level = l, key = key }
local b = redis.call('ZSCORE', L.blocked, key)
if b then out.blockedUntil = (b == 'inf' or tonumber(b) == INF) and 'concurrency' or tonumber(b) end
local now = tonumber(ARGV[2] or '')
if now then
  local p = math.max(tonumber(redis.call('HGET', L.state, 'pause') or '0'), tonumber(redis.call('HGET', L.keyState, 'pause:' .. key) or '0'))
  if p > now then out.pausedUntil = p end
end
if n > 1000 then
  local pos = n
  out.place, out.approximate = 1 + lower + rank * n + pos, true
  return cjson.encode(out)
end
local ring = redis.call('LRANGE', L.ring[l], 0, -1)
local before, others = true, 0
for _, k in ipairs(ring) do
  if k == key then
    before = false
  else
    local klo, khi = key_range(l, k)
    local count = redis.call('ZLEXCOUNT', L.line, klo, khi)
    others = others + math.min(count, before and rank + 1 or rank)
  end
end
out.place, out.approximate = 1 + lower + rank + others, false
return cjson.encode(out)
