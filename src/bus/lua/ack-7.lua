--[[
  Ends a turn: drops the messages it consumed, releases the lease and, when more messages wait
  (they arrived mid-turn), makes the session ready at once. Refused when the lease is not held,
  unless this very ack call (ARGV[6]) acked it already: the call replayed after its reply was lost
  succeeds, while a second ack of the claim is still refused.

  KEYS[1] in:<sid>   mailbox
  KEYS[2] ready      ZSET sid -> due time
  KEYS[3] workers    ZSET worker id -> liveness expiry
  KEYS[4] own        HASH sid -> "<token>:<worker id>"
  KEYS[5] wake       LIST of wake-up tokens
  KEYS[6] attempts   HASH first message id -> failed claims
  KEYS[7] done:<token>  the id of the ack call that ended this lease (10 minutes)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] messages consumed
  ARGV[4] now (ms), or "" for Redis's clock
  ARGV[5] id of the batch's first message
  ARGV[6] id of this ack call
  ARGV[7] the claim's attempt (1: no failed claims to forget)
  Output: 1, or the error LEASE_LOST
]]
--- @include "includes/end-lease"
--- @include "includes/clock"

local now = clockOf(ARGV[4])
local refused = refusedEnd(KEYS[4], KEYS[3], ARGV[1], ARGV[2], now, KEYS[7], ARGV[6])
if refused then
  return refused
end
endLease(KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6], ARGV[1], tonumber(ARGV[3]), now, ARGV[5], ARGV[7])
return 1
