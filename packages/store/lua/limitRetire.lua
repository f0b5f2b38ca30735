--[[
  limitRetire — deletes one agent type's limiter once it holds nothing (decision 0020 §1.7): no limit
  (cleared, or pause-only), nothing waiting, no live permit, no pause ahead (the agent type's or a key's).
  The leader supervisor runs it for draining and expired pause-only limiters, then removes the registry
  entry (limitRegister 'remove').

  KEYS: the limiter's keys (_limiter.lua)   ARGV[1] now (epoch ms)
  Returns JSON { retired: true } | { retired: false, reason }
]]
--@include _limiter

local now = lim_now(tonumber(ARGV[1]), false)
local function busy(reason) return cjson.encode({ retired = false, reason = reason }) end
if redis.call('EXISTS', L.cfg) == 1 then return busy('a limit is set') end
local waiting = redis.call('ZCARD', L.line)
if waiting > 0 then return busy(waiting .. ' step(s) wait') end
local live = redis.call('ZCOUNT', L.inflight, '(' .. fmt(now - GRACE_MS), '+inf')
if live > 0 then return busy(live .. ' permit(s) live') end
if tonumber(redis.call('HGET', L.state, 'pause') or '0') > now then return busy('paused') end
local flat = redis.call('HGETALL', L.keyState)
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, 6) == 'pause:' and tonumber(flat[i + 1]) > now then return busy('a key is paused') end
end
redis.call('DEL', L.cfg, L.tickets, L.line, L.ring[1], L.ring[2], L.ring[3], L.ring[4], L.ring[5], L.inring,
  L.promote, L.inflight, L.keyState, L.blocked, L.idle, L.state, L.gps, L.waitIdx)
return cjson.encode({ retired = true })
