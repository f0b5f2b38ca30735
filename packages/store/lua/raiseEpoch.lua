--[[
  raiseEpoch — a candidate elected with an epoch some bucket had already seen (the election's INCR was
  lost in a failover of its primary, decision 0015) moves the counter up to that epoch, so that the next
  election issues a new one.
  KEYS[1] epoch counter   ARGV[1] the highest epoch a bucket has seen
  Returns the counter's value.
]]
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local seen = tonumber(ARGV[1])
if current < seen then
  redis.call('SET', KEYS[1], seen)
  return seen
end
return current
