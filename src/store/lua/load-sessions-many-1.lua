--[[
  Reads sessions' meta and history, each session in one step (a concurrent compact or reset is
  seen whole or not at all), in one round trip for every session a worker loads in one moment.
  A session's last change is its score in `sessions` (appends update only that, not the meta):
  read for the whole batch in one ZMSCORE.

  The sessions' keys are built here from a prefix: they share the hash tag of the deployment's keys.
  KEYS[1] sessions  ZSET session key -> updatedAt
  ARGV[1] prefix of the sessions' keys ("{p}:session:"): <prefix><key>:meta HASH key, createdAt,
          generation (updatedAt as of the last compact or reset); <prefix><key>:history LIST of
          JSON entries, oldest first
  ARGV[2..] session keys
  Output: { meta as a flat field/value list (empty for an unknown session), { entry JSON, ... }, ...,
          { updatedAt or false, ... } }: a pair per session, in order, then the sessions' scores
]]
local reply = {}
local keys = {}
for index = 2, #ARGV do
  local base = ARGV[1] .. ARGV[index]
  table.insert(reply, redis.call("HGETALL", base .. ":meta"))
  table.insert(reply, redis.call("LRANGE", base .. ":history", 0, -1))
  table.insert(keys, ARGV[index])
end
table.insert(reply, redis.call("ZMSCORE", KEYS[1], unpack(keys)))
return reply
