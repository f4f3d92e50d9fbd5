--[[
  Extends a lease that is still held (token matches and not expired).

  KEYS[1] own     HASH sid -> token
  KEYS[2] lease   ZSET sid -> lease expiry (ms)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms)
  ARGV[4] lease TTL (ms)
  Output: 1 extended, 0 lost
]]
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
local expiry = redis.call("ZSCORE", KEYS[2], ARGV[1])
if (not expiry) or tonumber(expiry) <= tonumber(ARGV[3]) then
  return 0
end
redis.call("ZADD", KEYS[2], "XX", tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[1])
return 1
