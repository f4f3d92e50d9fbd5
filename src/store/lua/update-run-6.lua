--[[
  Compare-and-set on a workflow run's own fields: applies them only when the run's status is one
  of the allowed ones, and moves it between the status indexes when its status changes.

  KEYS[1] wfrun:<id>                 HASH field -> value as JSON text
  KEYS[2] wfruns:status:pending      ZSET id -> createdAt
  KEYS[3] wfruns:status:running      ZSET id -> createdAt
  KEYS[4] wfruns:status:completed    ZSET id -> createdAt
  KEYS[5] wfruns:status:failed       ZSET id -> createdAt
  KEYS[6] wfruns:status:cancelled    ZSET id -> createdAt
  ARGV[1] id
  ARGV[2] statuses the run must be in, comma-separated, or "*" for any
  ARGV[3..] field, JSON value, field, JSON value, ... (may be empty)
  Output: 1 updated; 0 it does not exist or its status is not an allowed one (nothing written)
]]
local id, allowed = ARGV[1], ARGV[2]
local statusKeys = { pending = KEYS[2], running = KEYS[3], completed = KEYS[4], failed = KEYS[5], cancelled = KEYS[6] }

local function unquote(text)
  return text and string.match(text, '^"(.*)"$')
end

local current = unquote(redis.call("HGET", KEYS[1], "status"))
if not current then return 0 end
if allowed ~= "*" and not string.find("," .. allowed .. ",", "," .. current .. ",", 1, true) then return 0 end

local target = current
for index = 3, #ARGV, 2 do
  if ARGV[index] == "status" then target = unquote(ARGV[index + 1]) end
end
if not statusKeys[target] then return redis.error_reply("ERR unknown run status " .. tostring(target)) end

if #ARGV > 2 then redis.call("HSET", KEYS[1], unpack(ARGV, 3)) end
if target ~= current then
  local createdAt = redis.call("HGET", KEYS[1], "createdAt")
  if statusKeys[current] then redis.call("ZREM", statusKeys[current], id) end
  redis.call("ZADD", statusKeys[target], createdAt, id)
end
return 1
