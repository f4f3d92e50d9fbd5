--[[
  A worker's liveness renewal, one per worker for all its leases (not one per session): pushes its
  entry in `workers` on to now + TTL, and says which of the leases it believes it holds are still
  its own. Refused when the entry already ran out or was reaped: its leases are void (another
  worker may hold those sessions now) and the worker must go on under a new id.

  KEYS[1] workers   ZSET worker id -> liveness expiry (ms)
  KEYS[2] own       HASH sid -> "<token>:<worker id>"
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] lease TTL (ms)
  ARGV[3] worker id
  ARGV[4..] the session keys the worker holds
  Output: -1 when the worker's liveness ran out; else the current lease of each session asked
          about ("<token>:<worker id>", or false), in order
]]
--- @include "includes/clock"

local now = clockOf(ARGV[1])
local expiry = redis.call("ZSCORE", KEYS[1], ARGV[3])
if (not expiry) or tonumber(expiry) <= now then
  return -1
end
redis.call("ZADD", KEYS[1], "GT", now + tonumber(ARGV[2]), ARGV[3])
if #ARGV < 4 then
  return {}
end
return redis.call("HMGET", KEYS[2], unpack(ARGV, 4))
