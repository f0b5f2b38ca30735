--[[
  takeIntakeSlot — one client's submission rate limit (decision 0022), a generic cell-rate algorithm
  (GCRA): the client's state is its theoretical arrival time `tat`. A submission within the rate is taken
  at once; one over it gets a reserved slot — kept under its task id, so that when it comes back at that
  time it is taken without reserving another — and the scheduler puts it back until then.

  KEYS[1] the client's intake state (hash: tat → theoretical arrival time, r:<taskId> → a reserved slot; epoch ms)
  ARGV[1] task id   ARGV[2] now (epoch ms)   ARGV[3] interval (ms between two submissions at the rate)
  ARGV[4] burst tolerance (ms: interval × (burst − 1))

  Returns 0 (take it now) or how many ms to wait (put it back that long).
]]
--@include _gcra

local key, field = KEYS[1], 'r:' .. ARGV[1]
local now, interval, tolerance = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local reserved = tonumber(redis.call('HGET', key, field))
if reserved then
  if reserved <= now then
    redis.call('HDEL', key, field)
    return 0
  end
  return math.ceil(reserved - now)
end

local tat = tonumber(redis.call('HGET', key, 'tat') or '0')
local allowAt = gcra_allow_at(tat, now, tolerance)
local nextTat = gcra_take(tat, now, interval)
redis.call('HSET', key, 'tat', string.format('%.3f', nextTat))
-- Kept an hour past the last reservation, then dropped: by then the client's allowance is whole again.
redis.call('PEXPIRE', key, math.ceil(nextTat - now) + 3600000)
if allowAt <= now then return 0 end
redis.call('HSET', key, field, string.format('%.3f', allowAt))
return math.ceil(allowAt - now)
