--[[
  Ends the turns a worker finished in one moment, each with its reply if it has one, in one call:
  for each turn, adds the reply to its channel's outbound stream, drops the messages the turn
  consumed, releases the lease and, when more messages wait (they arrived mid-turn), makes the
  session ready at once. The clock, the liveness of the worker and the replay marker are read and
  written once for the whole batch instead of once per turn.

  Each turn is refused on its own (its entry in the reply says LEASE_LOST, nothing of it is done)
  when its lease is not held: another token holds the session, or its worker's liveness ran out.
  The batch carries a call id: replayed after its reply was lost (ioredis resends it), every turn
  of it finds its lease gone, and the reply of the first run, kept under done:<call id>, is
  returned without anything done twice. A second ack of a turn (another call) is still refused.

  Mailboxes and streams are built here from prefixes: they share the hash tag of the other keys.
  KEYS[1] ready      ZSET sid -> due time
  KEYS[2] workers    ZSET worker id -> liveness expiry
  KEYS[3] own        HASH sid -> "<token>:<worker id>"
  KEYS[4] wake       LIST of wake-up tokens
  KEYS[5] attempts   HASH first message id -> failed claims
  KEYS[6] done:<call id>  this call's reply (10 minutes)
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] mailbox key prefix ("{p}:in:")
  ARGV[3] outbound stream key prefix ("{p}:out:")
  ARGV[4] approximate stream length kept
  ARGV[5 + 7(i-1) ..] turn i: sid, token, messages consumed, id of the batch's first message, the
          claim's attempt, the reply's channel ("" without a reply), the reply's stream event (JSON)
  Output: one entry per turn, in order: 1, or "LEASE_LOST <why>"
]]
--- @include "includes/end-lease"
--- @include "includes/clock"

local now = clockOf(ARGV[1])
-- Liveness is per worker, and a batch is one worker's: asked once.
local alive = {}
local function held(sid, token)
  local lease = redis.call("HGET", KEYS[3], sid)
  local separator = lease and string.find(lease, ":", 1, true)
  if (not separator) or string.sub(lease, 1, separator - 1) ~= token then
    return "the session's lease is held by another token"
  end
  local worker = string.sub(lease, separator + 1)
  if alive[worker] == nil then
    local expiry = redis.call("ZSCORE", KEYS[2], worker)
    alive[worker] = (expiry and tonumber(expiry) > now) and true or false
  end
  if not alive[worker] then
    return "the session's lease expired (its worker stopped renewing)"
  end
  return nil
end

local results = {}
local replayChecked = false
for base = 5, #ARGV - 6, 7 do
  local sid, token = ARGV[base], ARGV[base + 1]
  local lost = held(sid, token)
  if lost then
    -- Every turn of a replayed batch has lost its lease (the first run ended it): the first lost
    -- one looks for the first run's reply.
    if not replayChecked then
      replayChecked = true
      local first = redis.call("GET", KEYS[6])
      if first then
        return cjson.decode(first)
      end
    end
    table.insert(results, "LEASE_LOST " .. lost)
  else
    if ARGV[base + 5] ~= "" then
      redis.call("XADD", ARGV[3] .. ARGV[base + 5], "MAXLEN", "~", ARGV[4], "*", "event", ARGV[base + 6])
    end
    endLease(ARGV[2] .. sid, KEYS[1], KEYS[3], KEYS[4], KEYS[5], sid, tonumber(ARGV[base + 2]), now, ARGV[base + 3], ARGV[base + 4])
    table.insert(results, 1)
  end
end
redis.call("SET", KEYS[6], cjson.encode(results), "PX", 600000)
return results
