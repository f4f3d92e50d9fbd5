--[[
  Creates a workflow run with its nodes, unless one with its id exists, and adds it to the indexes.

  KEYS[1] wfrun:<id>                   HASH field -> value as JSON text: the run's fields, and
                                       `node:<nodeId>:<field>` for each node's
  KEYS[2] wfruns                       ZSET id -> createdAt
  KEYS[3] wfruns:session:<sessionKey>  ZSET id -> createdAt
  KEYS[4] wfruns:team:<teamId>         ZSET id -> createdAt
  KEYS[5] wfruns:status:<status>       ZSET id -> createdAt, for the run's status
  ARGV[1] id
  ARGV[2] createdAt (ms)
  ARGV[3..] field, JSON value, field, JSON value, ...
  Output: 1 created, 0 a run with this id exists (then nothing was written)
]]
local id, createdAt = ARGV[1], ARGV[2]

if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], unpack(ARGV, 3))
for index = 2, 5 do redis.call("ZADD", KEYS[index], createdAt, id) end
return 1
