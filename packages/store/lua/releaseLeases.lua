--[[
  releaseLeases — releases several leases in one call: each key is deleted only while it still holds
  the token it was taken with (Redlock's release, for many leases at once; decision 0006). A lease that
  expired, or that its owner's next operation took over, is left alone.

  KEYS[i] a lease   ARGV[i] the token it was taken with
  Returns the number released.
]]
local released = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then
    redis.call('DEL', key)
    released = released + 1
  end
end
return released
