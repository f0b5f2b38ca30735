--[[
  limitConfigure — sets (or, with '', removes) one agent type's limit in its limiter, then runs the grant
  loop, so a raised or removed limit lets waiting steps go at once (decision 0020 §1.7). Every blocked key
  is put back in turn: its per-key limits may have changed. A changed rate rescales the agent type's GCRA
  debt to the new interval (tat − now, in grants owed, is kept): a rate raised from 1/h to 20/s lets the
  waiting steps go at the new rate, not an hour later; no rate any more drops it. (Per-key `tat:` fields are
  not rescaled: each lapses within one old interval of its key.)

  KEYS: the limiter's keys (_limiter.lua)
  ARGV[1] now (epoch ms)
  ARGV[2] the limit, compact JSON { c?, ri?, rb?, k?, kc?, kri?, kb?, pk? } ('' = no limit)
  Returns JSON { grants, wakeAt?, waiting, limited } (as limitApply).
]]
--@include _limiter

local now = lim_now(tonumber(ARGV[1]), true)
local oldRi = tonumber(redis.call('HGET', L.cfg, 'ri'))
local newRi = nil
if ARGV[2] ~= '' then newRi = tonumber(cjson.decode(ARGV[2]).ri) end
if oldRi ~= newRi then
  local tat = tonumber(redis.call('HGET', L.state, 'tat') or '0')
  if not newRi then redis.call('HDEL', L.state, 'tat')
  elseif oldRi and tat > now then redis.call('HSET', L.state, 'tat', fmt(now + (tat - now) * newRi / oldRi)) end
end
redis.call('DEL', L.cfg)
if ARGV[2] ~= '' then
  local c = cjson.decode(ARGV[2])
  local fields = {}
  for _, f in ipairs({ 'c', 'ri', 'rb', 'kc', 'kri', 'kb' }) do
    if c[f] ~= nil then fields[#fields + 1] = f; fields[#fields + 1] = fmt(tonumber(c[f])) end
  end
  if c.k ~= nil then fields[#fields + 1] = 'k'; fields[#fields + 1] = cjson.encode(c.k) end
  if c.pk then fields[#fields + 1] = 'pk'; fields[#fields + 1] = '1' end
  if #fields > 0 then redis.call('HSET', L.cfg, unpack(fields)) end
end
for _, key in ipairs(redis.call('ZRANGE', L.blocked, 0, -1)) do unblock(key) end
local grants = {}
return limiter_reply(grants, grant_loop(now, grants))
