--[[
  Deletes a workflow run (its nodes are fields of the same hash) and its index entries.

  KEYS[1] wfrun:<id>                   HASH
  KEYS[2] wfruns                       ZSET id -> createdAt
  KEYS[3] wfruns:session:<sessionKey>  ZSET, of the session the caller read
  KEYS[4] wfruns:team:<teamId>         ZSET, of the team the caller read
  KEYS[5..9] wfruns:status:<status>    ZSETs, pending running completed failed cancelled
  ARGV[1] id
  Output: 1 deleted, 0 no run has this id
]]
local id = ARGV[1]

if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("DEL", KEYS[1])
for index = 2, 9 do redis.call("ZREM", KEYS[index], id) end
return 1
