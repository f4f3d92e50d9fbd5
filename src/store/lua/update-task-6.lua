--[[
  Compare-and-set on a subagent task: applies the fields only when the task's status is one of
  the allowed ones, and moves it between the status indexes when its status changes. A worker that
  finishes after the task was cancelled elsewhere is refused here, in the same step as the check.

  KEYS[1] task:<id>                HASH field -> value as JSON text
  KEYS[2] tasks:status:pending     ZSET id -> createdAt
  KEYS[3] tasks:status:running     ZSET id -> createdAt
  KEYS[4] tasks:status:completed   ZSET id -> createdAt
  KEYS[5] tasks:status:failed      ZSET id -> createdAt
  KEYS[6] tasks:status:cancelled   ZSET id -> createdAt
  ARGV[1] id
  ARGV[2] statuses the task must be in, comma-separated ("pending,running"), or "*" for any
  ARGV[3..] field, JSON value, field, JSON value, ... (may be empty)
  Output: the task after the update as a flat field/value list, or nil when it does not exist or
  its status is not an allowed one (then nothing was written)
]]
local id, allowed = ARGV[1], ARGV[2]
local statusKeys = { pending = KEYS[2], running = KEYS[3], completed = KEYS[4], failed = KEYS[5], cancelled = KEYS[6] }

-- Values are JSON text; a status is a JSON string such as "running" (quotes included).
local function unquote(text)
  return text and string.match(text, '^"(.*)"$')
end

local current = unquote(redis.call("HGET", KEYS[1], "status"))
if not current then return nil end
if allowed ~= "*" and not string.find("," .. allowed .. ",", "," .. current .. ",", 1, true) then return nil end

local target = current
for index = 3, #ARGV, 2 do
  if ARGV[index] == "status" then target = unquote(ARGV[index + 1]) end
end
if not statusKeys[target] then return redis.error_reply("ERR unknown task status " .. tostring(target)) end

if #ARGV > 2 then redis.call("HSET", KEYS[1], unpack(ARGV, 3)) end
if target ~= current then
  local createdAt = redis.call("HGET", KEYS[1], "createdAt")
  if statusKeys[current] then redis.call("ZREM", statusKeys[current], id) end
  redis.call("ZADD", statusKeys[target], createdAt, id)
end
return redis.call("HGETALL", KEYS[1])
