--[[
  Adds an outbound event to a channel's stream only if the publisher still holds the session's
  lease: a worker fenced out by a takeover cannot publish.

  KEYS[1] own            HASH sid -> token
  KEYS[2] lease          ZSET sid -> lease expiry
  KEYS[3] out:<channel>  STREAM of outbound events
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms)
  ARGV[4] event JSON
  ARGV[5] approximate stream length kept
  Output: the stream entry id, or the error LEASE_LOST
]]
--- @include "includes/lease-held"

local lost = leaseLost(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if lost then
  return redis.error_reply("LEASE_LOST " .. lost)
end
return redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], "*", "event", ARGV[4])
