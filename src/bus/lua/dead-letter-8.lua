--[[
  Parks the first messages of a poison batch in the dead-letter list, then acks them like ack-many-6.
  Refused when the lease is not held, unless this very call (ARGV[8]) did it already (a replay).

  KEYS[1] in:<sid>   mailbox
  KEYS[2] ready      ZSET sid -> due time
  KEYS[3] workers    ZSET worker id -> liveness expiry
  KEYS[4] own        HASH sid -> "<token>:<worker id>"
  KEYS[5] wake       LIST of wake-up tokens
  KEYS[6] attempts   HASH first message id -> failed claims
  KEYS[7] dead       LIST of dead letters (JSON), newest first
  KEYS[8] done:<token>  the id of the call that ended this lease (10 minutes)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] messages to park
  ARGV[4] now (ms), or "" for Redis's clock
  ARGV[5] id of the batch's first message
  ARGV[6] reason
  ARGV[7] dead letters kept
  ARGV[8] id of this call
  ARGV[9] the claim's attempt
  Output: 1, or the error LEASE_LOST
]]
--- @include "includes/end-lease"
--- @include "includes/clock"

local now = clockOf(ARGV[4])
local refused = refusedEnd(KEYS[4], KEYS[3], ARGV[1], ARGV[2], now, KEYS[8], ARGV[8])
if refused then
  return refused
end
local count = tonumber(ARGV[3])
local parked = redis.call("LRANGE", KEYS[1], 0, count - 1)
local letter = cjson.encode({ sessionKey = ARGV[1], reason = ARGV[6], at = now, messages = parked })
redis.call("LPUSH", KEYS[7], letter)
redis.call("LTRIM", KEYS[7], 0, tonumber(ARGV[7]) - 1)
endLease(KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6], ARGV[1], count, now, ARGV[5], ARGV[9])
return 1
