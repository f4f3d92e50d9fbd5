--[[
  Declares (or renews) draft audiences: each lasts until now + TTL. Audiences that lapsed are
  dropped on the way, so the set holds only live ones.

  KEYS[1] draft-audience  ZSET audience -> expiry (ms); audience "<channel>" or "<channel>:<chatId>"
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] TTL (ms)
  ARGV[3..] audiences
  Output: the number of live audiences
]]
--- @include "includes/clock"

local now = clockOf(ARGV[1])
local expiry = now + tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
for index = 3, #ARGV do
  -- GT: never shortens what another process declared for longer.
  redis.call("ZADD", KEYS[1], "GT", expiry, ARGV[index])
end
return redis.call("ZCARD", KEYS[1])
