--[[
  Appends entries to a session's history, creating the session when it is new. With a fencing
  token it writes only while that token holds the session's bus lease: the check and the write
  are one step, so a worker whose lease was taken over cannot slip a write in between.

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
  ARGV[4..] entries (JSON)
  Output: the history length, or the error LEASE_LOST (then nothing was written)
]]
--- @include "includes/fenced-write"
--- @include "../../bus/lua/includes/clock"

local sessionKey, now, token = ARGV[1], clockOf(ARGV[2]), ARGV[3]

local refused = fencedWriteRefused(KEYS[6], KEYS[4], KEYS[5], sessionKey, token, now)
if refused ~= nil then
  return refused
end

if #ARGV < 4 then
  return redis.call("LLEN", KEYS[2])
end

-- A session's meta and its entry in `sessions` are created together (here, in compact and in
-- reset) and neither is ever deleted: a session new to `sessions` (ZADD adds 1) has no meta yet.
if redis.call("ZADD", KEYS[3], now, sessionKey) == 1 then
  redis.call("HSET", KEYS[1], "key", sessionKey, "createdAt", now, "generation", 0, "updatedAt", now)
else
  redis.call("HSET", KEYS[1], "updatedAt", now)
end

-- unpack() is bounded by Lua's C stack: push in slices.
local length = 0
for first = 4, #ARGV, 1000 do
  length = redis.call("RPUSH", KEYS[2], unpack(ARGV, first, math.min(first + 999, #ARGV)))
end
return length
