--[[
  Reads a session's meta and history in one step, so a concurrent compact or reset is seen whole
  or not at all.

  KEYS[1] session:<key>:meta      HASH key, createdAt, updatedAt, generation
  KEYS[2] session:<key>:history   LIST of JSON entries, oldest first
  Output: { meta as a flat field/value list (empty for an unknown session), { entry JSON, ... } }
]]
return { redis.call("HGETALL", KEYS[1]), redis.call("LRANGE", KEYS[2], 0, -1) }
