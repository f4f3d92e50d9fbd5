--[[
  Whether a lease is still held: its token is the session's current one and it has not expired.

  KEYS[1] own     HASH sid -> token
  KEYS[2] lease   ZSET sid -> lease expiry (ms)
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms)
  Output: 1 held, 0 not
]]
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
local expiry = redis.call("ZSCORE", KEYS[2], ARGV[1])
if (not expiry) or tonumber(expiry) <= tonumber(ARGV[3]) then
  return 0
end
return 1
