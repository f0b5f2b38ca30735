--[[
  limitPump — runs one agent type's grant loop (decision 0020 §2.5): a scheduler's timer at the limiter's
  wakeAt, or the leader supervisor's pump_limit command when that timer was lost.

  KEYS: the limiter's keys (_limiter.lua)   ARGV[1] now (epoch ms)
  Returns JSON { grants, wakeAt?, waiting, limited } (as limitApply).
]]
--@include _limiter

local now = lim_now(tonumber(ARGV[1]), true)
local grants = {}
return limiter_reply(grants, grant_loop(now, grants))
