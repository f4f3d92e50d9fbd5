--[[
  Deletes a subagent task and its index entries, optionally only when its status is an allowed
  one and it finished before a time (what `cleanup` needs, checked in the same step as the delete).

  KEYS[1] task:<id>                    HASH field -> value as JSON text
  KEYS[2] tasks                        ZSET id -> createdAt
  KEYS[3] tasks:session:<sessionKey>   ZSET id -> createdAt, of the session the caller read
  KEYS[4] tasks:status:pending         ZSET id -> createdAt
  KEYS[5] tasks:status:running         ZSET id -> createdAt
  KEYS[6] tasks:status:completed       ZSET id -> createdAt
  KEYS[7] tasks:status:failed          ZSET id -> createdAt
  KEYS[8] tasks:status:cancelled       ZSET id -> createdAt
  ARGV[1] id
  ARGV[2] the task's sessionKey as the caller read it (JSON text), which KEYS[3] belongs to
  ARGV[3] statuses the task must be in, comma-separated, or "*" for any
  ARGV[4] it must have finished (completedAt, else createdAt) before this (ms), or "" for any time
  Output: 1 deleted; 0 missing, not in an allowed status or not old enough; -1 it belongs to
  another session than KEYS[3] (read it again and retry); nothing is written unless 1
]]
local id, sessionKey, allowed, before = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local statusKeys = { pending = KEYS[4], running = KEYS[5], completed = KEYS[6], failed = KEYS[7], cancelled = KEYS[8] }

local fields = redis.call("HMGET", KEYS[1], "status", "sessionKey", "completedAt", "createdAt")
if not fields[1] then return 0 end
if fields[2] ~= sessionKey then return -1 end
local status = string.match(fields[1], '^"(.*)"$')
if allowed ~= "*" and not string.find("," .. allowed .. ",", "," .. tostring(status) .. ",", 1, true) then return 0 end
if before ~= "" and tonumber(fields[3] or fields[4]) >= tonumber(before) then return 0 end

redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], id)
redis.call("ZREM", KEYS[3], id)
if status and statusKeys[status] then redis.call("ZREM", statusKeys[status], id) end
return 1
