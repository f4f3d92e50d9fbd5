--[[
  Keeps events in their chats' logs, in one round trip for every event a gateway keeps in one
  moment, and says for each which event was its chat's newest before it, so a reader that had read
  up to that one knows it has exactly this event left (no read of the log needed). Trims each log
  to its bound. The expiry of a log and of its delivered mark is renewed only when asked (the
  gateway asks once in a while per chat, not per event: two PEXPIRE saved on almost every event)
  and whenever the log was empty (a new log, or one deleted since), so no log is left without one.

  The logs' keys are built here from a prefix: they share the hash tag of the deployment's keys.
  KEYS[1] the first event's log (routes the script to the tag's slot; it is written with the rest)
  ARGV[1] prefix of the logs ("{p}:chat-events:<channel>:"); a log is <prefix><chat>:log, STREAM
          of field `payload`, and its mark <prefix><chat>:delivered
  ARGV[2] events kept per chat
  ARGV[3] how long a renewed log and its mark live (ms)
  ARGV[4], ARGV[5], ARGV[6], ... triples of chat id, payload, "1" to renew the expiry (else "")
  Output: { id, previous newest id or "", ... } a pair per event, in order
]]
local reply = {}
for index = 4, #ARGV - 2, 3 do
  local base = ARGV[1] .. ARGV[index]
  local log = base .. ":log"
  local newest = redis.call("XREVRANGE", log, "+", "-", "COUNT", 1)
  local id = redis.call("XADD", log, "MAXLEN", ARGV[2], "*", "payload", ARGV[index + 1])
  local previous = ""
  if newest[1] then
    previous = newest[1][1]
  end
  if previous == "" or ARGV[index + 2] == "1" then
    redis.call("PEXPIRE", log, ARGV[3])
    redis.call("PEXPIRE", base .. ":delivered", ARGV[3])
  end
  table.insert(reply, id)
  table.insert(reply, previous)
end
return reply
