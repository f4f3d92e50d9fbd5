--[[
  Adds an outbound event to a channel's stream only if the publisher still holds the session's
  lease: a worker fenced out by a takeover cannot publish. The same publish replayed after its
  reply was lost returns the entry it added instead of adding a second.

  KEYS[1] own            HASH sid -> "<token>:<worker id>"
  KEYS[2] workers        ZSET worker id -> liveness expiry
  KEYS[3] out:<channel>  STREAM of outbound events
  KEYS[4] published:<token>:<outbound id>  the entry this publish added (10 minutes)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms), or "" for Redis's clock
  ARGV[4] event JSON
  ARGV[5] approximate stream length kept
  Output: the stream entry id, or the error LEASE_LOST
]]
--- @include "includes/lease-held"
--- @include "includes/clock"

local added = redis.call("GET", KEYS[4])
if added then
  return added
end
local lost = leaseLost(KEYS[1], KEYS[2], ARGV[1], ARGV[2], clockOf(ARGV[3]))
if lost then
  return redis.error_reply("LEASE_LOST " .. lost)
end
local id = redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], "*", "event", ARGV[4])
redis.call("SET", KEYS[4], id, "PX", 600000)
return id
