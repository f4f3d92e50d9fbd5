--[[
  Appends entries to the histories of the sessions whose turns a worker saved in one moment, in one
  call (the clock, the worker's liveness and the replay marker are read and written once for all of
  them), creating a session when it is new. With a fencing token
  an append writes only while that token holds the session's bus lease: the check and the write
  are one step, so a worker whose lease was taken over cannot slip a write in between. Each append
  is refused on its own (its entry in the reply says LEASE_LOST, nothing of it is written).

  The call carries an id: its marker, write:<call id>, is set first and keeps the call's reply, so
  the call replayed after its reply was lost (ioredis resends it) gets that reply back and writes
  nothing twice, fenced or not (a lease is not ended by an append: without the marker a fenced
  replay would pass its check again). A call whose appends were all refused leaves no marker.

  Session keys are built here from a prefix: they share the hash tag of the other keys.
  KEYS[1] sessions          ZSET session key -> updatedAt (the meta's updatedAt is set only at creation)
  KEYS[2] own               HASH session key -> "<token>:<worker id>" of the current lease (the bus's)
  KEYS[3] workers           ZSET worker id -> liveness expiry in ms (the bus's)
  KEYS[4] write:<call id>   this call's reply (1 hour)
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] session key prefix ("{p}:session:"): <prefix><key>:meta, <prefix><key>:history
  ARGV[3..] per append: session key, fencing token ("" for an unfenced write), n, then n entries (JSON)
  Output: one entry per append, in order: the history length, or "LEASE_LOST <why>"
]]
--- @include "../../bus/lua/includes/clock"
--- @include "../../bus/lua/includes/lease-held"

local replayed = redis.call("SET", KEYS[4], "[]", "NX", "PX", 3600000, "GET")
if replayed then
  return cjson.decode(replayed)
end
local now = clockOf(ARGV[1])
-- Liveness is per worker: asked once per worker in the batch.
local alive = {}
local function lost(sessionKey, token)
  return leaseLostIn(alive, KEYS[2], KEYS[3], sessionKey, token, now)
end

local results = {}
local written = false
local index = 3
while index <= #ARGV do
  local sessionKey, token, count = ARGV[index], ARGV[index + 1], tonumber(ARGV[index + 2])
  local first, last = index + 3, index + 2 + count
  index = last + 1
  local refused = token ~= "" and lost(sessionKey, token)
  local history = ARGV[2] .. sessionKey .. ":history"
  if refused then
    table.insert(results, "LEASE_LOST " .. refused)
  elseif count == 0 then
    written = true
    table.insert(results, redis.call("LLEN", history))
  else
    written = true
    -- A session's meta and its entry in `sessions` are created together (here, in compact and in
    -- reset) and neither is ever deleted: a session new to `sessions` (ZADD adds 1) has no meta yet.
    -- The session's last change is its score there; the meta's updatedAt is not written again
    -- (readers take the score: one command per append less).
    if redis.call("ZADD", KEYS[1], now, sessionKey) == 1 then
      redis.call("HSET", ARGV[2] .. sessionKey .. ":meta", "key", sessionKey, "createdAt", now, "generation", 0, "updatedAt", now)
    end
    local length = 0
    -- unpack() is bounded by Lua's C stack: push in slices.
    for from = first, last, 1000 do
      length = redis.call("RPUSH", history, unpack(ARGV, from, math.min(from + 999, last)))
    end
    table.insert(results, length)
  end
end
if written then
  redis.call("SET", KEYS[4], cjson.encode(results), "PX", 3600000)
else
  -- Every append refused: nothing was written, not even the marker (a replay is refused again).
  redis.call("DEL", KEYS[4])
end
return results
