--[[
  Deletes an agent team and its entry in the name index.

  KEYS[1] team:<id>     HASH json -> the team record (JSON), nameKey -> its name as compared
  KEYS[2] teams:names   HASH nameKey -> team id, every team
  ARGV[1] id
  Output: 1 deleted, 0 no team has this id
]]
local id = ARGV[1]

local nameKey = redis.call("HGET", KEYS[1], "nameKey")
if not nameKey then return 0 end
redis.call("DEL", KEYS[1])
if redis.call("HGET", KEYS[2], nameKey) == id then redis.call("HDEL", KEYS[2], nameKey) end
return 1
