--[[
  leadership — acquire or renew the supervisor leadership lease. The epoch grows by one on every
  election (never on a renewal), and is the fencing value every supervisor write carries.

  KEYS[1] leader key (value: "<id>|<epoch>", with a PX lease)   KEYS[2] epoch counter
  ARGV[1] candidate id   ARGV[2] lease ms
  Returns { 1, epoch } leading (elected now or renewed) | { 0, '<leader id>|<epoch>' } another leads
]]
local leaderKey, epochKey = KEYS[1], KEYS[2]
local id, lease = ARGV[1], tonumber(ARGV[2])
local holder = redis.call('GET', leaderKey)
if holder then
  local sep = string.find(holder, '|', 1, true)
  if string.sub(holder, 1, sep - 1) == id then
    redis.call('PEXPIRE', leaderKey, lease)
    return { 1, tonumber(string.sub(holder, sep + 1)) }
  end
  return { 0, holder }
end
local epoch = redis.call('INCR', epochKey)
redis.call('SET', leaderKey, id .. '|' .. epoch, 'PX', lease)
return { 1, epoch }
