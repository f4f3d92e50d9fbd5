--[[
  Moves a chat's delivered mark up to an event id, never back (two gateways may report
  deliveries out of order).

  KEYS[1] chat-events:<channel>:<chat>:delivered   STRING the newest event id some client was sent
  ARGV[1] the event id just delivered, "<ms>-<seq>"
  ARGV[2] how long the mark lives, ms (the log's own expiry)
  Output: 1 when the mark moved, 0 otherwise
]]
local function parts(id)
  local time, sequence = string.match(id, "^(%d+)-(%d+)$")
  return tonumber(time), tonumber(sequence)
end

local current = redis.call("GET", KEYS[1])
if current then
  local currentTime, currentSequence = parts(current)
  local time, sequence = parts(ARGV[1])
  if time < currentTime or (time == currentTime and sequence <= currentSequence) then
    return 0
  end
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return 1
