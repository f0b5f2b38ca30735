--[[
  querySearch — one bucket's part of task.query and task.count (decision 0021 §1.3). Read-only.

  KEYS[1] the bucket's search index (lexicographic, score 0)   KEYS[2] the bucket's tasks index (by createdAt)
  ARGV[1] mode: 'list' (return matches) | 'count'
  ARGV[2] the bucket's task key prefix (scan mode reads the candidates' fields, as purgeFinished builds keys)
  ARGV[3] upper position's createdAt   ARGV[4] its task id — the position is exclusive; "\127" (above every
          task id) takes every task of that millisecond
  ARGV[5] since: the lowest createdAt, inclusive
  ARGV[6] want: stop after this many matches (list)   ARGV[7] budget: stop after examining this many entries
  ARGV[8] 'index' | 'scan'
    index: ARGV[9..] the filters as `<kind>\31<value>` prefixes (t k=v, s status, w workflow, c client);
           the one with the fewest members in the window drives, the others are checked by ZSCORE of the
           candidate's exact member (a tagged task has one member per kind, so this is O(1) each).
    scan:  (no tag filter; untagged tasks are not in the search index) ARGV[9] status, ARGV[10] workflow,
           ARGV[11] client ('' = any): the tasks index drives, each candidate's fields read with one HMGET.
  Returns json{ m = {ts, id, ts, id, ...} (list), n = matches counted, x = 1 when the window is exhausted,
                e = 1 when n is exact (a count answered by one index count), s = entries examined,
                rt, ri = the last entry examined (the caller continues below it) }
  Newest first: createdAt descending, then task id descending (the byte order of both indexes).
]]

local SEP = '\31'
local mode, prefix = ARGV[1], ARGV[2]
local hiTs, hiId, since = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local want, budget, how = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local list = mode == 'list'
local function ts13(t) return string.format('%013d', t) end

local out = { m = {}, n = 0, x = 0, e = 0, s = 0 }

if how == 'index' then
  local filters = {}
  for i = 9, #ARGV do filters[#filters + 1] = ARGV[i] end
  local function lo(p) return '[' .. p .. SEP .. ts13(since) end
  local function hi(p) return '(' .. p .. SEP .. ts13(hiTs) .. SEP .. hiId end
  local driver = 1
  if #filters == 1 then
    if not list then
      out.n, out.e, out.x = redis.call('ZLEXCOUNT', KEYS[1], lo(filters[1]), hi(filters[1])), 1, 1
      return cjson.encode(out)
    end
  else
    local fewest
    for i, p in ipairs(filters) do
      local c = redis.call('ZLEXCOUNT', KEYS[1], lo(p), hi(p))
      if not fewest or c < fewest then fewest, driver = c, i end
    end
    if fewest == 0 then
      out.x, out.e = 1, 1
      return cjson.encode(out)
    end
  end
  local d = filters[driver]
  local skip = #d + 2
  local cur, stop = hi(d), lo(d)
  while true do
    local room = budget - out.s
    local chunk = list and (want - out.n) or room
    if #filters > 1 then chunk = math.max(chunk, 32) end
    chunk = math.min(chunk, room, 1000)
    if chunk <= 0 then break end
    local batch = redis.call('ZREVRANGEBYLEX', KEYS[1], cur, stop, 'LIMIT', 0, chunk)
    local done = false
    for _, m in ipairs(batch) do
      local ts = tonumber(string.sub(m, skip, skip + 12))
      local id = string.sub(m, skip + 14)
      out.s = out.s + 1
      out.rt, out.ri = ts, id
      local ok = true
      for i, p in ipairs(filters) do
        if i ~= driver and not redis.call('ZSCORE', KEYS[1], p .. SEP .. ts13(ts) .. SEP .. id) then ok = false break end
      end
      if ok then
        out.n = out.n + 1
        if list then out.m[#out.m + 1] = ts; out.m[#out.m + 1] = id end
        if list and out.n >= want then done = true break end
      end
    end
    if done then break end
    if #batch < chunk then out.x = 1 break end
    cur = '(' .. batch[#batch]
  end
  if out.x == 1 and not list then out.e = 1 end
  return cjson.encode(out)
end

-- scan: the tasks index, newest first, from the position down to since.
local status, workflow, client = ARGV[9] or '', ARGV[10] or '', ARGV[11] or ''
local filtered = status ~= '' or workflow ~= '' or client ~= ''
if not list and not filtered and hiId == '\127' then
  out.n, out.e, out.x = redis.call('ZCOUNT', KEYS[2], since, hiTs), 1, 1
  return cjson.encode(out)
end
local top, offset = hiTs, 0
while true do
  local room = budget - out.s
  local chunk = math.min(list and math.max(want - out.n, 32) or room, room, 1000)
  if chunk <= 0 then break end
  local batch = redis.call('ZREVRANGEBYSCORE', KEYS[2], top, since, 'WITHSCORES', 'LIMIT', offset, chunk)
  local n = #batch / 2
  local done = false
  for i = 1, n do
    local id, ts = batch[2 * i - 1], tonumber(batch[2 * i])
    if ts == top then offset = offset + 1 else top, offset = ts, 1 end
    out.s = out.s + 1
    out.rt, out.ri = ts, id
    local ok = not (ts == hiTs and id >= hiId)
    if ok and filtered then
      local f = redis.call('HMGET', prefix .. id, 'status', 'workflow', 'client')
      ok = f[1] ~= false
        and (status == '' or f[1] == status)
        and (workflow == '' or f[2] == workflow)
        and (client == '' or (f[3] or 'default') == client)
    end
    if ok then
      out.n = out.n + 1
      if list then out.m[#out.m + 1] = ts; out.m[#out.m + 1] = id end
      if list and out.n >= want then done = true break end
    end
  end
  if done then break end
  if n < chunk then out.x = 1 break end
end
if out.x == 1 and not list then out.e = 1 end
return cjson.encode(out)
