--[[
  Reads sessions' meta and history, each session in one step (a concurrent compact or reset is
  seen whole or not at all), in one round trip for every session a worker loads in one moment.
  A session's last change is its score in `sessions` (appends update only that, not the meta):
  read for the whole batch in one ZMSCORE.

  A history is only ever appended to between rewrites (compact, reset), so a reader that already
  holds its first n entries needs only the rest: given the stamp it read then (the meta's
  createdAt, generation, updatedAt and rewrites: a compact or reset changes it) and n, a session
  whose stamp is unchanged returns its entries from n on. Any doubt (the stamp changed, the list is
  shorter than n) returns the whole history.

  The sessions' keys are built here from a prefix: they share the hash tag of the deployment's keys.
  KEYS[1] sessions  ZSET session key -> updatedAt
  ARGV[1] prefix of the sessions' keys ("{p}:session:"): <prefix><key>:meta HASH key, createdAt,
          generation, updatedAt (as of the last compact or reset), rewrites (compacts and resets);
          <prefix><key>:history LIST of JSON entries, oldest first
  ARGV[2..] per session: its key, the stamp held ("" for none), the entries held (0 for none)
  Output: { meta as a flat field/value list (empty for an unknown session), { entry JSON, ... },
          the index of the first entry returned (0: the whole history), the stamp, ...,
          { updatedAt or false, ... } }: four parts per session, in order, then the sessions' scores
]]
local reply = {}
local keys = {}
for index = 2, #ARGV, 3 do
  local base = ARGV[1] .. ARGV[index]
  local meta = redis.call("HGETALL", base .. ":meta")
  local fields = {}
  for field = 1, #meta, 2 do
    fields[meta[field]] = meta[field + 1]
  end
  local stamp = (fields.createdAt or "") .. ":" .. (fields.generation or "") .. ":" .. (fields.updatedAt or "") .. ":" .. (fields.rewrites or "0")
  local held = tonumber(ARGV[index + 2]) or 0
  local from = 0
  local entries
  if held > 0 and stamp == ARGV[index + 1] then
    entries = redis.call("LRANGE", base .. ":history", held, -1)
    -- Nothing new, or a list shorter than what is held (it cannot be, without a rewrite): asked once more.
    if #entries > 0 or redis.call("LLEN", base .. ":history") == held then
      from = held
    end
  end
  if from == 0 then
    entries = redis.call("LRANGE", base .. ":history", 0, -1)
  end
  table.insert(reply, meta)
  table.insert(reply, entries)
  table.insert(reply, from)
  table.insert(reply, stamp)
  table.insert(keys, ARGV[index])
end
table.insert(reply, redis.call("ZMSCORE", KEYS[1], unpack(keys)))
return reply
