--[[
  Closes a send budget for a while: the platform answered 429 (Telegram's retry_after, Discord's
  bucket headers, Feishu's rate-limit code), so every gateway of the bot holds back until then.
  The window is filled to its limit with calls that age out when the wait is over.

  KEYS[1] quota:<channel>:<account>:<scope key>
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] token (unique): filler members are <token>:<n>
  ARGV[3] how long it stays closed (ms)
  ARGV[4] limit
  ARGV[5] window (ms)
  Output: the calls now in the window
]]
--- @include "../../bus/lua/includes/clock"

local now = clockOf(ARGV[1])
local closedFor = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local window = tonumber(ARGV[5])
local filler = now + closedFor - window

redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - window)
-- Calls already in the window now age out no earlier than the filler.
local early = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", "(" .. filler)
for _, member in ipairs(early) do
  redis.call("ZADD", KEYS[1], filler, member)
end
local count = redis.call("ZCARD", KEYS[1])
for n = count + 1, limit do
  redis.call("ZADD", KEYS[1], filler, ARGV[2] .. ":" .. n)
end
redis.call("PEXPIRE", KEYS[1], math.max(closedFor, 0) + window + 1000)
return redis.call("ZCARD", KEYS[1])
