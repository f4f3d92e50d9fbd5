--[[
  Ends the turns a worker finished in one moment, each with its reply if it has one, in one call:
  for each turn, appends what the turn adds to its session's history (the store's keys, under the
  same hash tag), adds the reply to its channel's outbound stream, drops the messages the turn
  consumed, releases the lease and, when more messages wait (they arrived mid-turn), makes the
  session ready at once. The history and the reply are kept together or not at all: one lease
  check, one replay marker and one call per moment for both. The clock, the liveness of the worker and the replay marker are read and
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
  KEYS[7] sessions   ZSET session key -> its last change (the store's, as append-history-many writes it)
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] mailbox key prefix ("{p}:in:")
  ARGV[3] outbound stream key prefix ("{p}:out:")
  ARGV[4] approximate stream length kept
  ARGV[5] session key prefix of the store ("{p}:session:"): <prefix><sid>:meta, <prefix><sid>:history
  ARGV[6..] turn after turn: sid, token, messages consumed, id of the batch's first message, the
          claim's attempt, the reply's channel ("" without a reply), the reply's stream event (JSON),
          n, then n history entries (JSON) to append
  Output: one entry per turn, in order: 1, or "LEASE_LOST <why>"
]]
--- @include "includes/end-lease"
--- @include "includes/lease-held"
--- @include "includes/clock"

local now = clockOf(ARGV[1])
-- Liveness is per worker, and a batch is one worker's: asked once.
local alive = {}
local function held(sid, token)
  return leaseLostIn(alive, KEYS[3], KEYS[2], sid, token, now)
end

-- As append-history-many does: a session new to `sessions` gets its meta; the score is its last change.
local function appendHistory(sid, first, last)
  if first > last then
    return
  end
  if redis.call("ZADD", KEYS[7], now, sid) == 1 then
    redis.call("HSET", ARGV[5] .. sid .. ":meta", "key", sid, "createdAt", now, "generation", 0, "updatedAt", now)
  end
  -- unpack() is bounded by Lua's C stack: push in slices.
  for from = first, last, 1000 do
    redis.call("RPUSH", ARGV[5] .. sid .. ":history", unpack(ARGV, from, math.min(from + 999, last)))
  end
end

local results = {}
local replayChecked = false
local base = 6
while base <= #ARGV do
  local sid, token = ARGV[base], ARGV[base + 1]
  local entries = tonumber(ARGV[base + 7])
  local turn = base
  base = base + 8 + entries
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
    appendHistory(sid, turn + 8, turn + 7 + entries)
    if ARGV[turn + 5] ~= "" then
      redis.call("XADD", ARGV[3] .. ARGV[turn + 5], "MAXLEN", "~", ARGV[4], "*", "event", ARGV[turn + 6])
    end
    endLease(ARGV[2] .. sid, KEYS[1], KEYS[3], KEYS[4], KEYS[5], sid, tonumber(ARGV[turn + 2]), now, ARGV[turn + 3], ARGV[turn + 4])
    table.insert(results, 1)
  end
end
redis.call("SET", KEYS[6], cjson.encode(results), "PX", 600000)
return results
