--[[
  Creates a subagent task, unless one with its id exists, and adds it to the indexes.

  KEYS[1] task:<id>                    HASH field -> value as JSON text
  KEYS[2] tasks                        ZSET id -> createdAt
  KEYS[3] tasks:session:<sessionKey>   ZSET id -> createdAt
  KEYS[4] tasks:status:<status>        ZSET id -> createdAt, for the task's status
  ARGV[1] id
  ARGV[2] createdAt (ms)
  ARGV[3..] field, JSON value, field, JSON value, ...
  Output: 1 created, 0 a task with this id exists (then nothing was written)
]]
local id, createdAt = ARGV[1], ARGV[2]

if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], unpack(ARGV, 3))
redis.call("ZADD", KEYS[2], createdAt, id)
redis.call("ZADD", KEYS[3], createdAt, id)
redis.call("ZADD", KEYS[4], createdAt, id)
return 1
