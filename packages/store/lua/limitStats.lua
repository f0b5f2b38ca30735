--[[
  limitStats — what one agent type's limiter holds now (decision 0020 §6), read-only: live permits,
  waiting tickets, the oldest wait, grants per second over the last 10 s, the pause, the counters, and
  with ARGV[2] > 0 that many keys with the most waiting (a scan of the keys' state: on demand only).

  KEYS: the limiter's keys (_limiter.lua)   ARGV[1] now (epoch ms)   ARGV[2] how many keys (0–100)
  Returns JSON { limited, inFlight, waiting, oldestWaitMs?, ratePerSecondNow, pausedUntil?, wakeAt?,
                 granted, released, reclaimed, throttled, keys: [{ key, inFlight, waiting, oldestWaitMs?,
                 pausedUntil?, blockedUntil? ('concurrency' or epoch ms) }] }
]]
--@include _limiter

local now = lim_now(tonumber(ARGV[1]), false)
local topN = tonumber(ARGV[2]) or 0
local st = redis.call('HMGET', L.state, 'waiting', 'pause', 'wakeAt', 'granted', 'released', 'reclaimed', 'throttled')
local out = {
  limited = redis.call('EXISTS', L.cfg) == 1,
  inFlight = redis.call('ZCOUNT', L.inflight, '(' .. fmt(now - GRACE_MS), '+inf'),
  waiting = tonumber(st[1] or '0'),
  granted = tonumber(st[4] or '0'), released = tonumber(st[5] or '0'),
  reclaimed = tonumber(st[6] or '0'), throttled = tonumber(st[7] or '0'),
}
local oldest = redis.call('ZRANGE', L.waitIdx, 0, 0, 'WITHSCORES')
if oldest[2] then out.oldestWaitMs = math.max(0, now - tonumber(oldest[2])) end
local sec = math.floor(now / 1000)
local sum = 0
for i = 0, 9 do sum = sum + tonumber(redis.call('HGET', L.gps, sec - i) or '0') end
out.ratePerSecondNow = sum / 10
local pause = tonumber(st[2] or '0')
if pause > now then out.pausedUntil = pause end
if st[3] then out.wakeAt = tonumber(st[3]) end

local keys = {}
if topN > 0 then
  local per = {}
  local flat = redis.call('HGETALL', L.keyState)
  for i = 1, #flat, 2 do
    local field, value = flat[i], tonumber(flat[i + 1])
    local kind, key = string.match(field, '^(%a+):(.*)$')
    if kind then
      per[key] = per[key] or { key = key, inFlight = 0, waiting = 0 }
      if kind == 'in' then per[key].inFlight = value
      elseif kind == 'w' then per[key].waiting = value
      elseif kind == 'pause' and value > now then per[key].pausedUntil = value end
    end
  end
  local list = {}
  for _, e in pairs(per) do
    if e.waiting > 0 or e.inFlight > 0 or e.pausedUntil then list[#list + 1] = e end
  end
  table.sort(list, function(a, b)
    if a.waiting ~= b.waiting then return a.waiting > b.waiting end
    return a.key < b.key
  end)
  for i = 1, math.min(topN, #list) do
    local e = list[i]
    local first
    for l = 1, 5 do
      local m = first_member(l, e.key)
      if m then
        local f = first_at_of(m, e.key)
        if first == nil or f < first then first = f end
      end
    end
    if first then e.oldestWaitMs = math.max(0, now - first) end
    local b = redis.call('ZSCORE', L.blocked, e.key)
    if b then e.blockedUntil = (b == 'inf' or tonumber(b) == INF) and 'concurrency' or tonumber(b) end
    keys[#keys + 1] = e
  end
end
out.keys = keys
return cjson.encode(out)
