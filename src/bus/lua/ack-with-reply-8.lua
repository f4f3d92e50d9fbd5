--[[
  Ends a turn and publishes its reply in one step: adds the reply to its channel's outbound stream,
  then acks like ack-7 (drops the consumed messages, releases the lease, re-readies the session
  when more wait). One round trip instead of a fenced publish and an ack, and no window between
  them in which the reply is out but the turn not acked. Refused, and nothing published, when the
  lease is not held, unless this very call (ARGV[6]) did it already: the call replayed after its
  reply was lost succeeds without a second stream entry.

  KEYS[1] in:<sid>   mailbox
  KEYS[2] ready      ZSET sid -> due time
  KEYS[3] workers    ZSET worker id -> liveness expiry
  KEYS[4] own        HASH sid -> "<token>:<worker id>"
  KEYS[5] wake       LIST of wake-up tokens
  KEYS[6] attempts   HASH first message id -> failed claims
  KEYS[7] done:<token>  the id of the call that ended this lease (10 minutes)
  KEYS[8] out:<channel>  STREAM of the reply's channel
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] messages consumed
  ARGV[4] now (ms), or "" for Redis's clock
  ARGV[5] id of the batch's first message
  ARGV[6] id of this call
  ARGV[7] the reply's stream event (JSON)
  ARGV[8] approximate stream length kept
  ARGV[9] the claim's attempt (1: no failed claims to forget)
  Output: 1, or the error LEASE_LOST
]]
--- @include "includes/end-lease"
--- @include "includes/clock"

local now = clockOf(ARGV[4])
local refused = refusedEnd(KEYS[4], KEYS[3], ARGV[1], ARGV[2], now, KEYS[7], ARGV[6])
if refused then
  return refused
end
redis.call("XADD", KEYS[8], "MAXLEN", "~", ARGV[8], "*", "event", ARGV[7])
endLease(KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6], ARGV[1], tonumber(ARGV[3]), now, ARGV[5], ARGV[9])
return 1
