--[[
  limitRegister — the registry of limited agent types (decision 0020 §1.6, §1.7), in the `{<ns>:limits}`
  slot: what every process's LimitCache reads. Each change bumps `version`.

  KEYS[1] agents (hash: agent → JSON)   KEYS[2] version (string)
  ARGV[1] op   ARGV[2] agent   ARGV[3] its argument
    'set' json          the agent type's limit (JSON as the API reports it, with setAt)
    'drain' ''          cleared: { "draining": true } until its line is empty (then retired)
    'pause' until       a pause-only entry { "pausedUntil": ms } — only when there is no entry, a draining
                        one, or a pause-only one that ends earlier (a limit's limiter takes its pause itself)
    'remove' json       removes the entry only if it is still exactly `json` (compare and delete)
  Returns 1 when the registry changed, else 0.
]]
local agents, version = KEYS[1], KEYS[2]
local op, agent, arg = ARGV[1], ARGV[2], ARGV[3]
local current = redis.call('HGET', agents, agent)

local function write(json)
  redis.call('HSET', agents, agent, json)
  redis.call('INCR', version)
  return 1
end

if op == 'set' then return write(arg) end
if op == 'drain' then return write('{"draining":true}') end
if op == 'pause' then
  local untilTs = tonumber(arg)
  if current then
    local e = cjson.decode(current)
    if not e.draining and not e.pausedUntil then return 0 end
    if e.pausedUntil and tonumber(e.pausedUntil) >= untilTs then return 0 end
  end
  return write(cjson.encode({ pausedUntil = untilTs }))
end
if op == 'remove' then
  if current ~= arg then return 0 end
  redis.call('HDEL', agents, agent)
  redis.call('INCR', version)
  return 1
end
return redis.error_reply('limitRegister: unknown op ' .. tostring(op) .. ": use 'set', 'drain', 'pause' or 'remove'")
