--[[
  Gives a lease back without consuming anything: the session is ready again at once, and the
  batch's count of failed claims goes up (a claim given back is an attempt that did not finish).

  KEYS[1] own        HASH sid -> "<token>:<worker id>"
  KEYS[2] ready      ZSET sid -> due time
  KEYS[3] in:<sid>   mailbox
  KEYS[4] wake       LIST of wake-up tokens
  KEYS[5] attempts   HASH first message id -> failed claims of that batch
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms), or "" for Redis's clock
  Output: 1 released, 0 it was not held
]]
--- @include "includes/clock"
--- @include "includes/wake"
--- @include "includes/count-attempt"

local held = redis.call("HGET", KEYS[1], ARGV[1])
if (not held) or string.sub(held, 1, #ARGV[2] + 1) ~= ARGV[2] .. ":" then
  return 0
end
redis.call("HDEL", KEYS[1], ARGV[1])
local first = redis.call("LINDEX", KEYS[3], 0)
if first then
  countAttempt(KEYS[5], first)
  redis.call("ZADD", KEYS[2], "NX", clockOf(ARGV[3]), ARGV[1])
  wakeOne(KEYS[4])
end
return 1
