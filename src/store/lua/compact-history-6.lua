--[[
  Replaces a session's history with the kept entries and moves every other entry to the archive
  of the current generation. Entries are compared as JSON text, each kept entry matching one
  stored entry (as the file store does). With a fencing token it writes only while that token holds
  the session's bus lease, checked in this same step.

  KEYS[1] session:<key>:meta      HASH key, createdAt, updatedAt, generation
  KEYS[2] session:<key>:history   LIST of JSON entries, oldest first
  KEYS[3] sessions                ZSET session key -> updatedAt
  KEYS[4] own                     HASH session key -> "<token>:<worker id>" of the current lease (the bus's)
  KEYS[5] workers                 ZSET worker id -> liveness expiry in ms (the bus's)
  KEYS[6] write:<write id>        marker of this very write (1 hour): replayed after its reply
                                  was lost (ioredis resends it), the write is not done twice
  ARGV[1] session key
  ARGV[2] now (ms), or "" for Redis's clock
  ARGV[3] fencing token, or "" for an unfenced write
  ARGV[4] how long the archive is kept after this addition (ms), or 0 for ever
  ARGV[5..] kept entries (JSON), oldest first
  Output: how many entries were archived, or the error LEASE_LOST (then nothing was written)

  The archive key, session:<key>:archive:<generation>, is KEYS[2] with "history" replaced: the
  generation is only known here. It carries the same hash tag, so it lives in the same slot.
]]
--- @include "includes/fenced-write"
--- @include "../../bus/lua/includes/clock"

local sessionKey, now, token = ARGV[1], clockOf(ARGV[2]), ARGV[3]

local refused = fencedWriteRefused(KEYS[6], KEYS[4], KEYS[5], sessionKey, token, now)
if refused ~= nil then
  return refused
end

local suffix = ":history"
if string.sub(KEYS[2], -#suffix) ~= suffix then
  return redis.error_reply("ERR KEYS[2] must be a session's history key")
end

local function pushAll(key, values, first, last)
  for from = first, last, 1000 do
    redis.call("RPUSH", key, unpack(values, from, math.min(from + 999, last)))
  end
end

if redis.call("EXISTS", KEYS[1]) == 0 then
  redis.call("HSET", KEYS[1], "key", sessionKey, "createdAt", now, "generation", 0)
end
local generation = redis.call("HGET", KEYS[1], "generation") or "0"

local kept = {}
for index = 5, #ARGV do
  kept[ARGV[index]] = (kept[ARGV[index]] or 0) + 1
end
local dropped = {}
for _, entry in ipairs(redis.call("LRANGE", KEYS[2], 0, -1)) do
  local count = kept[entry]
  if count and count > 0 then
    kept[entry] = count - 1
  else
    dropped[#dropped + 1] = entry
  end
end

local archive = string.sub(KEYS[2], 1, -#suffix - 1) .. ":archive:" .. generation
pushAll(archive, dropped, 1, #dropped)
if #dropped > 0 and tonumber(ARGV[4]) > 0 then
  redis.call("PEXPIRE", archive, ARGV[4])
end
redis.call("DEL", KEYS[2])
pushAll(KEYS[2], ARGV, 5, #ARGV)
redis.call("HSET", KEYS[1], "updatedAt", now)
-- A reader holding the old history's first entries must read it whole again (load-sessions-many).
redis.call("HINCRBY", KEYS[1], "rewrites", 1)
redis.call("ZADD", KEYS[3], now, sessionKey)
return #dropped
