-- Shared fragment, inlined by the loader wherever a script says --@include _msgpack (decision 0019 §2.5).
-- A msgpack path locator: it finds the byte range of a value inside msgpack bytes and reads scalars,
-- never decoding a value into a Lua table nor encoding one again, so a slice is exactly the bytes the
-- client sent (an array's length with nil tails, int64, bin apart from str, key order: what cmsgpack
-- loses). Nothing recurses; every loop is bounded by the bytes' length; a value cut short, holding the
-- byte no value starts with (0xc1), or nested deeper than the codec's 128 levels is refused with a reason.
-- Positions are 1-based, as Lua's strings are.

local MP_MAX_DEPTH = 128

-- Headers by first byte, built once: str8/16/32 and bin8/16/32 (a length of 1, 2 or 4 bytes, then the
-- payload), ext8/16/32 (length, type byte, payload), fixext 1/2/4/8/16 (type byte, payload), and the
-- numbers and 16/32-bit container headers (a fixed number of bytes after the first).
local MP_SIZED = { [0xc4] = { 'bin', 1 }, [0xc5] = { 'bin', 2 }, [0xc6] = { 'bin', 4 }, [0xd9] = { 'str', 1 }, [0xda] = { 'str', 2 }, [0xdb] = { 'str', 4 } }
local MP_EXT = { [0xc7] = 1, [0xc8] = 2, [0xc9] = 4 }
local MP_FIXEXT = { [0xd4] = 1, [0xd5] = 2, [0xd6] = 4, [0xd7] = 8, [0xd8] = 16 }
local MP_FIXED = {
  [0xca] = { 'float', '>f', 4 }, [0xcb] = { 'float', '>d', 8 },
  [0xcc] = { 'int', '>I1', 1 }, [0xcd] = { 'int', '>I2', 2 }, [0xce] = { 'int', '>I4', 4 }, [0xcf] = { 'int', '>I8', 8 },
  [0xd0] = { 'int', '>i1', 1 }, [0xd1] = { 'int', '>i2', 2 }, [0xd2] = { 'int', '>i4', 4 }, [0xd3] = { 'int', '>i8', 8 },
  [0xdc] = { 'array', '>I2', 2 }, [0xdd] = { 'array', '>I4', 4 }, [0xde] = { 'map', '>I2', 2 }, [0xdf] = { 'map', '>I4', 4 },
}
local MP_SHORT = 'the bytes end inside a value'

-- The header of the value at `pos`: kind, a, b, after — where
--   'nil': a = nil; 'bool': a = true | false; 'int', 'float': a = the number (an int64 beyond 2^53 as
--   the nearest double); 'str', 'bin', 'ext': a = the payload's first position, b = its length (an
--   ext's type byte is not part of it); 'array', 'map': a = the count of elements or pairs;
-- and `after` = the position after the header (after the payload, for str, bin and ext).
-- Returns nil, reason when the bytes are not msgpack there.
local function mp_head(s, pos)
  local n = #s
  if pos > n then return nil, 'the bytes end before a value' end
  local b = string.byte(s, pos)
  if b <= 0x7f then return 'int', b, nil, pos + 1 end
  if b >= 0xe0 then return 'int', b - 256, nil, pos + 1 end
  if b <= 0x8f then return 'map', b - 0x80, nil, pos + 1 end
  if b <= 0x9f then return 'array', b - 0x90, nil, pos + 1 end
  if b <= 0xbf then
    local len = b - 0xa0
    if pos + len > n then return nil, MP_SHORT end
    return 'str', pos + 1, len, pos + 1 + len
  end
  if b == 0xc0 then return 'nil', nil, nil, pos + 1 end
  if b == 0xc2 then return 'bool', false, nil, pos + 1 end
  if b == 0xc3 then return 'bool', true, nil, pos + 1 end
  local sized = MP_SIZED[b]
  if sized then
    if pos + sized[2] > n then return nil, MP_SHORT end
    local len = struct.unpack('>I' .. sized[2], s, pos + 1)
    local first = pos + 1 + sized[2]
    if first + len - 1 > n then return nil, MP_SHORT end
    return sized[1], first, len, first + len
  end
  local ext = MP_EXT[b]
  if ext then
    if pos + ext + 1 > n then return nil, MP_SHORT end
    local len = struct.unpack('>I' .. ext, s, pos + 1)
    local first = pos + 2 + ext
    if first + len - 1 > n then return nil, MP_SHORT end
    return 'ext', first, len, first + len
  end
  local fixext = MP_FIXEXT[b]
  if fixext then
    if pos + fixext + 1 > n then return nil, MP_SHORT end
    return 'ext', pos + 2, fixext, pos + 2 + fixext
  end
  local fixed = MP_FIXED[b]
  if fixed then
    if pos + fixed[3] > n then return nil, MP_SHORT end
    return fixed[1], (struct.unpack(fixed[2], s, pos + 1)), nil, pos + 1 + fixed[3]
  end
  return nil, string.format('byte 0x%02x starts no msgpack value', b)
end

-- The position after the value at `pos`, which sits inside `depth` containers. Iterative: `left[d]`
-- counts the values still to skip at nesting level d. Returns nil, reason when the bytes are not one
-- whole value there or nest deeper than MP_MAX_DEPTH.
local function mp_skip(s, pos, depth)
  local left = { 1 }
  local level = 1
  -- Each turn reads one header and moves past it, so the bytes' length bounds the loop.
  for _ = 1, #s + 1 do
    local kind, a, _b, after = mp_head(s, pos)
    if not kind then return nil, a end
    pos = after
    left[level] = left[level] - 1
    if kind == 'array' or kind == 'map' then
      if depth + level > MP_MAX_DEPTH then return nil, 'it nests more than ' .. MP_MAX_DEPTH .. ' levels deep' end
      local count = kind == 'map' and 2 * a or a
      -- A container can hold no more values than there are bytes left (each takes one at least).
      if count > #s - pos + 1 then return nil, MP_SHORT end
      if count > 0 then
        level = level + 1
        left[level] = count
      end
    end
    while left[level] == 0 do
      left[level] = nil
      level = level - 1
      if level == 0 then return pos end
    end
  end
  return nil, MP_SHORT
end

-- The value at `segments` (a list of strings) inside the value at `pos`: against a map a segment is a
-- string key (compared byte for byte; the first such key wins), against an array a segment of digits
-- is a 0-based index. Returns the value's first position and the position after it; false when the
-- path leads nowhere (a missing key, an index out of range, a segment applied to a scalar); nil, reason
-- when the bytes are not msgpack on the way.
local function mp_locate(s, pos, segments)
  local depth = 0
  for i = 1, #segments do
    local seg = segments[i]
    local kind, a, _b, after = mp_head(s, pos)
    if not kind then return nil, a end
    if kind == 'array' then
      local index = string.match(seg, '^%d+$') and tonumber(seg) or nil
      if not index or index >= a then return false end
      pos = after
      for _ = 1, index do
        local nxt, err = mp_skip(s, pos, depth + 1)
        if not nxt then return nil, err end
        pos = nxt
      end
    elseif kind == 'map' then
      pos = after
      local found = false
      for _ = 1, a do
        local kk, ka, kb, kafter = mp_head(s, pos)
        if not kk then return nil, ka end
        if kk == 'str' and kb == #seg and string.sub(s, ka, ka + kb - 1) == seg then
          pos = kafter
          found = true
          break
        end
        local nxt, err = mp_skip(s, pos, depth + 1)
        if not nxt then return nil, err end
        nxt, err = mp_skip(s, nxt, depth + 1)
        if not nxt then return nil, err end
        pos = nxt
      end
      if not found then return false end
    else
      return false
    end
    depth = depth + 1
  end
  local stop, err = mp_skip(s, pos, depth)
  if not stop then return nil, err end
  return pos, stop
end

-- The scalar at `pos`: kind and value — 'nil' (nil), 'bool', 'int' and 'float' (numbers), 'str' and
-- 'bin' (the bytes, as a Lua string), 'array' and 'map' (the count), 'ext' (the payload's length).
local function mp_scalar(s, pos)
  local kind, a, b = mp_head(s, pos)
  if not kind then return nil, a end
  if kind == 'str' or kind == 'bin' then return kind, string.sub(s, a, a + b - 1) end
  if kind == 'ext' then return kind, b end
  return kind, a
end

-- The array at `pos`: its exact element count (nil tails included) and the position of its first element.
local function mp_array(s, pos)
  local kind, a, _b, after = mp_head(s, pos)
  if not kind then return nil, a end
  if kind ~= 'array' then return false end
  return a, after
end
