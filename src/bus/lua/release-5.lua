--[[
  Gives a lease back without consuming anything: the session is ready again at once.

  KEYS[1] own        HASH sid -> token
  KEYS[2] lease      ZSET sid -> lease expiry
  KEYS[3] ready      ZSET sid -> due time
  KEYS[4] in:<sid>   mailbox
  KEYS[5] wake       LIST of wake-up tokens
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms), or "" for Redis's clock
  Output: 1 released, 0 it was not held
]]
--- @include "includes/clock"

if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("HDEL", KEYS[1], ARGV[1])
if redis.call("LLEN", KEYS[4]) > 0 then
  redis.call("ZADD", KEYS[3], "NX", clockOf(ARGV[3]), ARGV[1])
  redis.call("LPUSH", KEYS[5], "1")
  redis.call("LTRIM", KEYS[5], 0, 63)
end
return 1
