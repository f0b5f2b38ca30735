--[[
  dropParentNotice — after childEnded, the leader removes the notice it delivered (decision 0019 §5.3),
  only if the member's score is still the one takeParentNotice set: a notice written meanwhile (the
  child was undone and ended again) is kept for its own delivery. Records what was delivered (`notified`).

  KEYS[1] child task hash   KEYS[2] deadlines   KEYS[3] the bucket's epoch fence
  ARGV[1] childId  ARGV[2] score (from takeParentNotice)  ARGV[3] `<kind>:<attempt>:<status>`  ARGV[4] epoch

  Returns { OK, '1' | '0' } (removed or kept) | { STALE_EPOCH, json{epoch} }
]]
--@include _common

local member = ARGV[1] .. '|' .. PARENT_NOTICE
local current = newer_epoch(KEYS[3], ARGV[4])
if current then return { STALE_EPOCH, cjson.encode({ epoch = current }) } end
local score = redis.call('ZSCORE', KEYS[2], member)
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return { OK, '0' } end
redis.call('ZREM', KEYS[2], member)
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'notified', ARGV[3]) end
return { OK, '1' }
