--[[
  Extends a lease that is still held (token matches and not expired).

  KEYS[1] own     HASH sid -> token
  KEYS[2] lease   ZSET sid -> lease expiry (ms)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms), or "" for Redis's clock
  ARGV[4] lease TTL (ms)
  Output: 1 extended, 0 lost
]]
--- @include "includes/lease-held"
--- @include "includes/clock"

local now = clockOf(ARGV[3])
if leaseLost(KEYS[1], KEYS[2], ARGV[1], ARGV[2], now) then
  return 0
end
redis.call("ZADD", KEYS[2], "XX", now + tonumber(ARGV[4]), ARGV[1])
return 1
