--[[
  resign — gives up the leadership lease, only if this candidate holds it (checked by owner token).
  KEYS[1] leader key   ARGV[1] "<id>|<epoch>"
  Returns 1 if released, 0 otherwise.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
