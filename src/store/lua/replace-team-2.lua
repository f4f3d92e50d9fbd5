--[[
  Replaces an agent team's record, moving its name in the name index when it was renamed.

  KEYS[1] team:<id>     HASH json -> the team record (JSON), nameKey -> its name as compared
  KEYS[2] teams:names   HASH nameKey -> team id, every team
  ARGV[1] id
  ARGV[2] nameKey of the new record
  ARGV[3] the new team record as JSON
  Output: {1} replaced; {0} no team has this id; {0, "name", otherId} the new name is another
  team's (nothing written)
]]
local id, nameKey, json = ARGV[1], ARGV[2], ARGV[3]

local oldKey = redis.call("HGET", KEYS[1], "nameKey")
if not oldKey then return { 0 } end
local holder = redis.call("HGET", KEYS[2], nameKey)
if holder and holder ~= id then return { 0, "name", holder } end
if oldKey ~= nameKey and redis.call("HGET", KEYS[2], oldKey) == id then redis.call("HDEL", KEYS[2], oldKey) end
redis.call("HSET", KEYS[1], "json", json, "nameKey", nameKey)
redis.call("HSET", KEYS[2], nameKey, id)
return { 1 }
