-- Shared by the bulk operation scripts (decision 0021 §2.2): the record as a JSON object, and its expiry.
local function op_record_json(opKey)
  local flat = redis.call('HGETALL', opKey)
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  return cjson.encode(r)
end
