--[[
  Keeps an event in a chat's log and says which event was the chat's newest before it, so a reader
  that had read up to that one knows it has exactly this event left (no read of the log needed).
  Trims the log to its bound and renews the expiry of the log and of its delivered mark.

  KEYS[1] chat-events:<channel>:<chat>:log         STREAM, field `payload`
  KEYS[2] chat-events:<channel>:<chat>:delivered   STRING the newest event id some client was sent
  ARGV[1] the payload
  ARGV[2] events kept
  ARGV[3] how long the log and the mark live after this event (ms)
  Output: { the new event's id, the previous newest id or "" }
]]
local newest = redis.call("XREVRANGE", KEYS[1], "+", "-", "COUNT", 1)
local id = redis.call("XADD", KEYS[1], "MAXLEN", ARGV[2], "*", "payload", ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[3])
redis.call("PEXPIRE", KEYS[2], ARGV[3])
local previous = ""
if newest[1] then
  previous = newest[1][1]
end
return { id, previous }
