--[[
  cancelChild — a scheduler applies a parent step's `cancel` operation to its child task (decision 0019 §5.2):
  the parent's run of the step stops (its undo began, it failed, or the step's timeout passed)
  — the child's own undo, under the child's lease; the link (parentKind, parentAttempt) moves forward only.
  KEYS and ARGV: child_stop in _child.lua.
  Returns { OK, json{lockEpoch, action, events, dispatch, status, …}, input, needs... }
          | { INVALID_STATE, json{reason} } (the id is another task's) | { LEASE_BUSY, '{}' }
  action: tombstone | cancelling | linked | ended
]]
--@include _child

return child_stop('cancel')
