--[[
  Whether a lease is still held: its token is the session's current one and its worker is alive.

  KEYS[1] own      HASH sid -> "<token>:<worker id>"
  KEYS[2] workers  ZSET worker id -> liveness expiry (ms)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms), or "" for Redis's clock
  Output: 1 held, 0 not
]]
--- @include "includes/lease-held"
--- @include "includes/clock"

if leaseLost(KEYS[1], KEYS[2], ARGV[1], ARGV[2], clockOf(ARGV[3])) then
  return 0
end
return 1
