--[[
  Publishes the newest text of a streaming reply, only when someone can see it: the reply's channel
  streams to every chat, or its chat is watched (a web page). The text goes under the draft's key
  and a pointer into the channel's outbound stream; nothing is written for a draft nobody watches.

  KEYS[1] draft-audience  ZSET audience -> expiry (ms); audience "<channel>" or "<channel>:<chatId>"
  KEYS[2] draft:<replyId>  the newest text (STRING)
  KEYS[3] out:<channel>    STREAM of outbound events
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] the channel's audience ("<channel>")
  ARGV[3] the chat's audience ("<channel>:<chatId>")
  ARGV[4] the text
  ARGV[5] how long the text is kept (ms)
  ARGV[6] the stream event (JSON)
  ARGV[7] approximate stream length kept
  Output: 1 published, 0 nobody watches
]]
--- @include "includes/clock"

local now = clockOf(ARGV[1])
-- Both audiences in one call: the channel's (it streams to every chat) and the chat's.
local expiries = redis.call("ZMSCORE", KEYS[1], ARGV[2], ARGV[3])
local function watched(expiry)
  return expiry and tonumber(expiry) > now
end
if not (watched(expiries[1]) or watched(expiries[2])) then
  return 0
end
redis.call("SET", KEYS[2], ARGV[4], "PX", ARGV[5])
redis.call("XADD", KEYS[3], "MAXLEN", "~", ARGV[7], "*", "event", ARGV[6])
return 1
