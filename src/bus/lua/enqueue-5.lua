--[[
  Queues an inbound message in its session's mailbox and, unless the session is leased, marks
  the session ready (keeping an earlier due time: ZADD NX), then wakes one waiting worker.

  KEYS[1] in:<sid>        the session's mailbox (LIST of message JSON)
  KEYS[2] ready           ZSET sid -> due time (ms)
  KEYS[3] lease           ZSET sid -> lease expiry (ms)
  KEYS[4] wake            LIST of wake-up tokens for blocked claimers
  KEYS[5] seen:<event>    dedupe marker of the platform event (ignored when ARGV[6] is "0")
  ARGV[1] message JSON
  ARGV[2] sid (session key)
  ARGV[3] now (ms)
  ARGV[4] debounce (ms)
  ARGV[5] dedupe TTL (ms)
  ARGV[6] "1" to dedupe on KEYS[5]
  Output: 1 queued, 0 duplicate (nothing queued)
]]
if ARGV[6] == "1" then
  if not redis.call("SET", KEYS[5], "1", "NX", "PX", ARGV[5]) then
    return 0
  end
end
redis.call("RPUSH", KEYS[1], ARGV[1])
local now = tonumber(ARGV[3])
local expiry = redis.call("ZSCORE", KEYS[3], ARGV[2])
if (not expiry) or tonumber(expiry) <= now then
  redis.call("ZADD", KEYS[2], "NX", now + tonumber(ARGV[4]), ARGV[2])
end
redis.call("LPUSH", KEYS[4], "1")
redis.call("LTRIM", KEYS[4], 0, 63)
return 1
