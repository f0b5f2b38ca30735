--[[
  fenceBucket — a new leader supervisor raises a bucket's fence to its epoch before its first sweep
  (decision 0015), so that a deposed leader's write is refused in every bucket from then on.

  KEYS[1] the bucket's epoch fence
  ARGV[1] epoch
  Returns { OK, epoch } | { STALE_EPOCH, current } (a newer leader already fenced the bucket)
]]
--@include _common

local current = newer_epoch(KEYS[1], ARGV[1])
if current then return { STALE_EPOCH, current } end
return { OK, tonumber(ARGV[1]) }
