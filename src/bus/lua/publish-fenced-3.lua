--[[
  Adds an outbound event to a channel's stream only if the publisher still holds the session's
  lease: a worker fenced out by a takeover cannot publish.

  KEYS[1] own            HASH sid -> token
  KEYS[2] lease          ZSET sid -> lease expiry
  KEYS[3] out:<channel>  STREAM of outbound events
  ARGV[1] sid
  ARGV[2] token
  ARGV[3] now (ms)
  ARGV[4] event JSON
  ARGV[5] approximate stream length kept
  Output: the stream entry id, or the error LEASE_LOST
]]
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return redis.error_reply("LEASE_LOST")
end
local expiry = redis.call("ZSCORE", KEYS[2], ARGV[1])
if (not expiry) or tonumber(expiry) <= tonumber(ARGV[3]) then
  return redis.error_reply("LEASE_LOST")
end
return redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[5], "*", "event", ARGV[4])
