-- _gcra — the generic cell rate algorithm (decision 0020 §1.2), shared by the dispatch limiters and the
-- submission rate limits (takeIntakeSlot, decision 0022). A flow's whole state is one number, its
-- theoretical arrival time `tat`. With emission interval I (ms between two calls at the rate) and
-- tolerance τ = (burst − 1)·I, a call at time t conforms when max(tat, t) − τ ≤ t, and taking it sets tat
-- to max(tat, t) + I. In any window of T ms at most burst + ⌊T / I⌋ calls conform.

-- The earliest time a call conforms: now or earlier means it may be taken now.
local function gcra_allow_at(tat, now, tolerance)
  if tat < now then tat = now end
  return tat - tolerance
end

-- The theoretical arrival time after a call is taken at `now`.
local function gcra_take(tat, now, interval)
  if tat < now then tat = now end
  return tat + interval
end
