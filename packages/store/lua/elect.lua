--[[
  elect — run by a supervisor that holds the leadership lease (taken with Redlock, decision 0004): raises
  the epoch, the fencing value every supervisor write carries, and records who leads, for operators and
  followers. With ARGV[3] (the holder's epoch) it only refreshes that record, raising nothing.

  KEYS[1] leader record (value: "<id>|<epoch>", with a PX expiry)   KEYS[2] epoch counter
  ARGV[1] the leader's id   ARGV[2] lease ms   ARGV[3] '' = a new election | the epoch to refresh
  Returns the epoch.
]]
local epoch = tonumber(ARGV[3])
if not epoch then epoch = redis.call('INCR', KEYS[2]) end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. epoch, 'PX', tonumber(ARGV[2]))
return epoch
