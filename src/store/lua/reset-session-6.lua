--[[
  Starts a fresh generation of a session (`/new`): the history moves to the archive of the
  current generation and the generation goes up by one. An unknown session is created at
  generation 1, like one that was reset while empty.

  KEYS[1] session:<key>:meta      HASH key, createdAt, updatedAt, generation
  KEYS[2] session:<key>:history   LIST of JSON entries, oldest first
  KEYS[3] sessions                ZSET session key -> updatedAt
  KEYS[4] own                     HASH session key -> "<token>:<worker id>" of the current lease (the bus's)
  KEYS[5] workers                 ZSET worker id -> liveness expiry in ms (the bus's)
  KEYS[6] write:<write id>        marker of this very write (1 hour): replayed after its reply
                                  was lost (ioredis resends it), the write is not done twice
  ARGV[1] session key
  ARGV[2] now (ms), or "" for Redis's clock
  ARGV[3] fencing token, or "" for an unfenced reset
  ARGV[4] how long the archive is kept after this addition (ms), or 0 for ever
  Output: the new generation, or the error LEASE_LOST (then nothing changed)

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

if redis.call("EXISTS", KEYS[1]) == 0 then
  redis.call("HSET", KEYS[1], "key", sessionKey, "createdAt", now, "generation", 0)
end
local generation = tonumber(redis.call("HGET", KEYS[1], "generation") or "0")

if redis.call("LLEN", KEYS[2]) > 0 then
  local archive = string.sub(KEYS[2], 1, -#suffix - 1) .. ":archive:" .. generation
  if redis.call("EXISTS", archive) == 0 then
    -- The usual case (no compaction in this generation): O(1).
    redis.call("RENAME", KEYS[2], archive)
  else
    local entries = redis.call("LRANGE", KEYS[2], 0, -1)
    for from = 1, #entries, 1000 do
      redis.call("RPUSH", archive, unpack(entries, from, math.min(from + 999, #entries)))
    end
    redis.call("DEL", KEYS[2])
  end
  if tonumber(ARGV[4]) > 0 then
    redis.call("PEXPIRE", archive, ARGV[4])
  end
end

redis.call("HSET", KEYS[1], "generation", generation + 1, "updatedAt", now)
redis.call("HINCRBY", KEYS[1], "rewrites", 1)
redis.call("ZADD", KEYS[3], now, sessionKey)
return generation + 1
