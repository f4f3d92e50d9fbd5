--[[
  Creates an agent team unless its id exists or another team has its name (compared without case).

  KEYS[1] team:<id>     HASH json -> the team record (JSON), nameKey -> its name as compared
  KEYS[2] teams:names   HASH nameKey -> team id, every team
  ARGV[1] id
  ARGV[2] nameKey (the name normalized and lower-cased)
  ARGV[3] the team record as JSON
  Output: {1} created; {0, "id"} the id exists; {0, "name", otherId} the name is taken (nothing written)
]]
local id, nameKey, json = ARGV[1], ARGV[2], ARGV[3]

if redis.call("EXISTS", KEYS[1]) == 1 then return { 0, "id" } end
local holder = redis.call("HGET", KEYS[2], nameKey)
if holder then return { 0, "name", holder } end
redis.call("HSET", KEYS[1], "json", json, "nameKey", nameKey)
redis.call("HSET", KEYS[2], nameKey, id)
return { 1 }
