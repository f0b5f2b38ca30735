-- Shared fragment, inlined by the loader after _msgpack wherever a script says --@include _when
-- (decision 0019 §1.4). Evaluates a step's `when` — the plan's compiled condition — over the stored
-- msgpack bytes of the task input and of step outputs, and says why it does not hold. It must answer
-- exactly as the reference evaluator in TypeScript (packages/core/src/evaluate.ts), reason included:
-- a property test compares the two. Nothing recurses; every loop is bounded.

local WHEN_MAX_REASON = 500
local WHEN_MAX_STRING = 60
local WHEN_ELLIPSIS = '\226\128\166' -- "…" in UTF-8
local WHEN_SYMBOL = { gt = '>', gte = '>=', lt = '<', lte = '<=' }

-- `s` cut to at most `max` bytes at a UTF-8 character boundary; with `ellipsis` the cut string ends
-- with "…" (its 3 bytes count).
local function when_cut(s, max, ellipsis)
  if #s <= max then return s end
  local n = ellipsis and max - 3 or max
  while n > 0 do
    local c = string.byte(s, n + 1)
    if c < 0x80 or c >= 0xc0 then break end
    n = n - 1
  end
  return string.sub(s, 1, n) .. (ellipsis and WHEN_ELLIPSIS or '')
end

-- An integer below 2^53 in full; anything else as the shortest %.<p>g that reads back as the same double.
local function when_number(v)
  if v ~= v then return 'NaN' end
  if v == math.huge then return 'Infinity' end
  if v == -math.huge then return '-Infinity' end
  if v == math.floor(v) and math.abs(v) < 9007199254740992 then return string.format('%d', v) end
  for p = 1, 17 do
    local t = string.format('%.' .. p .. 'g', v)
    if tonumber(t) == v then return t end
  end
  return string.format('%.17g', v)
end

local function when_string(b)
  local cut = when_cut(b, WHEN_MAX_STRING, false)
  local escaped = string.gsub(cut, '[%z\1-\31\127"\\]', function(c)
    if c == '"' or c == '\\' then return '\\' .. c end
    return string.format('\\u%04x', string.byte(c))
  end)
  return '"' .. escaped .. (#cut < #b and WHEN_ELLIPSIS or '') .. '"'
end

local function when_plural(n, one) return n .. ' ' .. one .. (n == 1 and '' or 's') end

-- A located value (its msgpack kind and scalar) as a reason shows it.
local function when_render(kind, v)
  if kind == 'nil' then return 'null' end
  if kind == 'bool' then return v and 'true' or 'false' end
  if kind == 'int' or kind == 'float' then return when_number(v) end
  if kind == 'str' then return when_string(v) end
  if kind == 'bin' then return '<' .. #v .. ' bytes>' end
  if kind == 'array' then return '[' .. when_plural(v, 'item') .. ']' end
  if kind == 'map' then return '{' .. when_plural(v, 'key') .. '}' end
  return '<ext>'
end

-- The class a value compares in: numbers of either encoding together, and each other kind on its own.
local function when_class(kind)
  if kind == 'int' or kind == 'float' then return 'num' end
  return kind
end

-- An operand from the plan (JSON, decoded by cjson): its kind and value in the locator's terms.
local function when_operand(o)
  if o == cjson.null then return 'nil', nil end
  local t = type(o)
  if t == 'boolean' then return 'bool', o end
  if t == 'number' then return 'float', o end
  return 'str', o
end

local function when_equal(kind, v, o)
  local ok, ov = when_operand(o)
  if when_class(kind) ~= when_class(ok) then return false end
  if kind == 'nil' then return true end
  if kind == 'int' or kind == 'float' or kind == 'bool' or kind == 'str' then return v == ov end
  return false
end

-- Strings as UTF-8 bytes (never strcoll, which follows the server's locale).
local function when_bytes_compare(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y and -1 or 1 end
  end
  if #a == #b then return 0 end
  return #a < #b and -1 or 1
end

-- -1, 0 or 1 for two numbers or two strings; nil when they do not compare (other kinds, NaN).
local function when_compare(kind, v, o)
  local ok, ov = when_operand(o)
  local c = when_class(kind)
  if c ~= when_class(ok) then return nil end
  if c == 'num' then
    if v ~= v or ov ~= ov then return nil end
    if v < ov then return -1 elseif v > ov then return 1 end
    return 0
  end
  if c == 'str' then return when_bytes_compare(v, ov) end
  return nil
end

-- One leaf: holds (boolean) and the reason when it does not; nil, reason when the bytes are not msgpack.
local function when_leaf(n, input, output_of)
  local path = table.concat(n.p, '.')
  local where = n.s == '' and path or (path == '' and n.s or n.s .. '.' .. path)
  local bytes
  if n.s == '' then bytes = input else bytes = output_of(n.s) end
  local present, kind, v = false, nil, nil
  if bytes then
    local pos, err = mp_locate(bytes, 1, n.p)
    if pos == nil then
      return nil, (n.s == '' and 'the task input' or 'the output of ' .. n.s) .. ' is not valid msgpack at ' .. where .. ' (' .. err .. ')'
    end
    if pos then
      present = true
      kind, v = mp_scalar(bytes, pos)
    end
  end
  local op, o = n.o, n.v
  local isNil = present and kind == 'nil'
  if op == 'exists' then
    if o == true then
      if present and not isNil then return true end
      return false, where .. ' is ' .. (present and 'null' or 'absent')
    end
    if not present or isNil then return true end
    return false, where .. ' ' .. when_render(kind, v) .. ' exists'
  end
  if op == 'ne' then
    if not present or not when_equal(kind, v, o) then return true end
    return false, where .. ' is ' .. when_render(when_operand(o))
  end
  if not present then return false, where .. ' is absent' end
  local holds, text
  if op == 'eq' then
    holds = when_equal(kind, v, o)
    text = when_render(when_operand(o))
  elseif op == 'in' then
    holds = false
    local shown = {}
    for i = 1, #o do
      if when_equal(kind, v, o[i]) then holds = true end
      shown[i] = when_render(when_operand(o[i]))
    end
    text = 'in [' .. table.concat(shown, ',') .. ']'
  else
    local c = when_compare(kind, v, o)
    holds = c ~= nil and ((op == 'gt' and c > 0) or (op == 'gte' and c >= 0) or (op == 'lt' and c < 0) or (op == 'lte' and c <= 0))
    text = (WHEN_SYMBOL[op] or op) .. ' ' .. when_render(when_operand(o))
  end
  if holds then return true end
  return false, when_cut(where .. ' ' .. when_render(kind, v) .. ' is not ' .. text, WHEN_MAX_REASON, true)
end

-- Evaluates a compiled condition (a leaf { s, p, o, v }, { A = all } or { O = any }): returns true, or
-- false and the reason (at most 500 bytes), or nil and why the bytes could not be read. `input` is the
-- task input's msgpack (nil: the task has none); `output_of(step)` a step's stored output (nil: none).
-- A walk with an explicit stack of the all/any being evaluated, short-circuiting left to right; each
-- node is entered once and left once, so the loop's bound (the plan allows at most 32 leaves in 4
-- levels) is never reached by a valid plan.
local function when_eval(pred, input, output_of)
  local frames = {}
  local node = pred
  local holds, reason
  for _ = 1, 1000 do
    if node then
      local list = node.A or node.O
      if list then
        frames[#frames + 1] = { list = list, all = node.A ~= nil, i = 1, reasons = {} }
        node = list[1]
      else
        local err
        holds, err = when_leaf(node, input, output_of)
        if holds == nil then return nil, err end
        reason = err
        node = nil
      end
    else
      local f = frames[#frames]
      if not f then
        if holds then return true end
        return false, when_cut(reason, WHEN_MAX_REASON, true)
      end
      if f.all then
        if holds and f.i < #f.list then
          f.i = f.i + 1
          node = f.list[f.i]
        else
          -- all: false with its first false condition's reason, or true when every one held.
          frames[#frames] = nil
        end
      else
        if holds then
          frames[#frames] = nil
          reason = nil
        else
          f.reasons[#f.reasons + 1] = reason
          if f.i < #f.list then
            f.i = f.i + 1
            node = f.list[f.i]
          else
            frames[#frames] = nil
            reason = 'none of: ' .. table.concat(f.reasons, '; ')
          end
        end
      end
    end
  end
  return nil, 'the condition is larger than a plan allows'
end
