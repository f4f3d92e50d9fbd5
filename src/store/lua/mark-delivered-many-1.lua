--[[
  Moves the delivered marks of several chats up to an event id each, never back (two gateways may
  report deliveries out of order), in one round trip for every chat a gateway delivered to in the
  last moment.

  The marks' keys are built here from a prefix: they share the hash tag of the deployment's keys.
  KEYS[1] the first chat's mark (routes the script to the tag's slot; it is marked with the rest)
  ARGV[1] prefix of the marks ("{p}:chat-events:<channel>:"); a mark is <prefix><chat>:delivered
  ARGV[2] how long a mark lives, ms (the log's own expiry)
  ARGV[3], ARGV[4], ... pairs of chat id and the event id just delivered there, "<ms>-<seq>"
  Output: how many marks moved
]]
local function parts(id)
  local time, sequence = string.match(id, "^(%d+)-(%d+)$")
  return tonumber(time), tonumber(sequence)
end

-- Set first and put back in the rare case it moved back (SET ... GET): one call per chat, not a
-- GET and a SET. The script is one step, so nobody sees the mark moved back in between.
local moved = 0
for index = 3, #ARGV - 1, 2 do
  local key = ARGV[1] .. ARGV[index] .. ":delivered"
  local id = ARGV[index + 1]
  local previous = redis.call("SET", key, id, "PX", ARGV[2], "GET")
  local forward = true
  if previous then
    local previousTime, previousSequence = parts(previous)
    local time, sequence = parts(id)
    forward = time > previousTime or (time == previousTime and sequence > previousSequence)
  end
  if forward then
    moved = moved + 1
  else
    redis.call("SET", key, previous, "PX", ARGV[2])
  end
end
return moved
