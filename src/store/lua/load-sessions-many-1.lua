--[[
  Reads sessions' meta and history, each session in one step (a concurrent compact or reset is
  seen whole or not at all), in one round trip for every session a worker loads in one moment.

  The sessions' keys are built here from a prefix: they share the hash tag of the deployment's keys.
  KEYS[1] the first session's meta (routes the script to the tag's slot; it is read with the rest)
  ARGV[1] prefix of the sessions' keys ("{p}:session:"): <prefix><key>:meta HASH key, createdAt,
          updatedAt, generation; <prefix><key>:history LIST of JSON entries, oldest first
  ARGV[2..] session keys
  Output: { meta as a flat field/value list (empty for an unknown session), { entry JSON, ... }, ... }
          a pair per session, in order
]]
local reply = {}
for index = 2, #ARGV do
  local base = ARGV[1] .. ARGV[index]
  table.insert(reply, redis.call("HGETALL", base .. ":meta"))
  table.insert(reply, redis.call("LRANGE", base .. ":history", 0, -1))
end
return reply
