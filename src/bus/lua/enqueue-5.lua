--[[
  Queues an inbound message in its session's mailbox and, unless the session is leased, marks
  the session ready (keeping an earlier due time: ZADD NX), then wakes one waiting worker.

  KEYS[1] in:<sid>        the session's mailbox (LIST of message JSON)
  KEYS[2] ready           ZSET sid -> due time (ms)
  KEYS[3] lease           ZSET sid -> lease expiry (ms)
  KEYS[4] wake            LIST of wake-up tokens for blocked claimers
  KEYS[5] seen:<event>    dedupe marker: of the platform event, or of the message id when it has none
  ARGV[1] message JSON
  ARGV[2] sid (session key)
  ARGV[3] now (ms), or "" for Redis's clock
  ARGV[4] debounce (ms)
  ARGV[5] dedupe TTL (ms)
  ARGV[6] the message id, stored in the marker
  Output: 1 queued (or queued already by this same message: a replay), 0 duplicate (nothing queued)
]]
--- @include "includes/clock"

if not redis.call("SET", KEYS[5], ARGV[6], "NX", "PX", ARGV[5]) then
  -- The marker names the message that set it: our own publish replayed after its reply was lost
  -- finds itself, is queued already and counts as accepted; another message is a duplicate.
  if redis.call("GET", KEYS[5]) == ARGV[6] then
    return 1
  end
  return 0
end
redis.call("RPUSH", KEYS[1], ARGV[1])
local now = clockOf(ARGV[3])
local expiry = redis.call("ZSCORE", KEYS[3], ARGV[2])
if (not expiry) or tonumber(expiry) <= now then
  redis.call("ZADD", KEYS[2], "NX", now + tonumber(ARGV[4]), ARGV[2])
end
redis.call("LPUSH", KEYS[4], "1")
redis.call("LTRIM", KEYS[4], 0, 63)
return 1
