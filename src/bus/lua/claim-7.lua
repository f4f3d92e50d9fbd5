--[[
  Claims the sessions that have been ready longest, up to ARGV[5] of them, for the worker ARGV[6]:
  each gets a fencing token (strictly increasing), a lease `own[sid] = "<token>:<worker>"` and its
  backlog (oldest first, at most ARGV[4] messages). A lease lives as long as its worker does: the
  worker's entry in `workers` is pushed on by this claim and by its batched renewals. With ARGV[7]
  set, workers whose liveness ran out are reaped first, so their sessions are ready again.
  Each call carries a claim id: the same call replayed (its reply lost with the connection) hands
  back the claims it made, not new ones, so no lease is orphaned and no attempt counted twice.

  KEYS[1] ready      ZSET sid -> due time (ms)
  KEYS[2] workers    ZSET worker id -> liveness expiry (ms)
  KEYS[3] own        HASH sid -> "<token>:<worker id>"
  KEYS[4] fence      counter of tokens (strictly increasing)
  KEYS[5] attempts   HASH first message id -> failed claims of that batch (reaped or released):
                     read here in one HMGET for the whole call, written only by those rare paths
  KEYS[6] claimed:<claim id>  the claims this call made (JSON), kept for twice the TTL + 10 s
  KEYS[7] wake       LIST of wake-up tokens
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] lease TTL (ms)
  ARGV[3] mailbox key prefix ("{p}:in:"); mailboxes share the hash tag of the other keys
  ARGV[4] most messages per claim
  ARGV[5] most sessions to claim (default 1)
  ARGV[6] the claiming worker's id
  ARGV[7] "1" to reap dead workers first
  ARGV[8] wake-up tokens the caller took already (its wait ended on one)
  Output: { sid, token, attempt, { message JSON, ... }, sid, token, ... } (four per claim), or
          { "", next due time or -1 } when nothing is due
]]
--- @include "includes/clock"
--- @include "includes/reap"

local replayed = redis.call("GET", KEYS[6])
if replayed then
  local made = cjson.decode(replayed)
  -- One claim (an object) as an older version of this script kept it, or a list of them.
  if made.sid then
    made = { made }
  end
  local reply = {}
  for _, claim in ipairs(made) do
    for _, value in ipairs({ claim.sid, claim.token, claim.attempt, redis.call("LRANGE", ARGV[3] .. claim.sid, 0, tonumber(ARGV[4]) - 1) }) do
      table.insert(reply, value)
    end
  end
  return reply
end

local now = clockOf(ARGV[1])
local worker = ARGV[6]
-- Reaped before this worker's own entry is pushed on: a worker that stalled past its TTL has lost
-- its leases like any dead one, and starts afresh.
if ARGV[7] == "1" then
  reapWorkers(KEYS[2], KEYS[3], KEYS[1], KEYS[7], KEYS[5], ARGV[3], now)
end

local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[5]) or 1)
if #due > 0 then
  redis.call("ZREM", KEYS[1], unpack(due))
  local backlogs = {}
  for _, sid in ipairs(due) do
    local messages = redis.call("LRANGE", ARGV[3] .. sid, 0, tonumber(ARGV[4]) - 1)
    if #messages > 0 then
      table.insert(backlogs, { sid = sid, messages = messages })
    end
  end
  if #backlogs > 0 then
    redis.call("ZADD", KEYS[2], "GT", now + tonumber(ARGV[2]), worker)
    local last = redis.call("INCRBY", KEYS[4], #backlogs)
    local firstIds = {}
    for index, backlog in ipairs(backlogs) do
      -- The bus writes a message's id first: read it without decoding the whole message (an id
      -- with a quote or backslash in it, or a message written otherwise, is decoded).
      local first = backlog.messages[1]
      firstIds[index] = string.match(first, '^{"id":"([^"\\]*)"') or cjson.decode(first)["id"]
    end
    local failed = redis.call("HMGET", KEYS[5], unpack(firstIds))
    local leases = {}
    local reply = {}
    local made = {}
    for index, backlog in ipairs(backlogs) do
      local token = last - #backlogs + index
      local attempt = (tonumber(failed[index]) or 0) + 1
      table.insert(leases, backlog.sid)
      table.insert(leases, token .. ":" .. worker)
      table.insert(made, { sid = backlog.sid, token = token, attempt = attempt })
      for _, value in ipairs({ backlog.sid, token, attempt, backlog.messages }) do
        table.insert(reply, value)
      end
    end
    redis.call("HSET", KEYS[3], unpack(leases))
    -- Kept well past the TTL: a lease lives as long as its worker, so a replay that found no
    -- marker (arriving after it lapsed) while the worker is still alive would orphan the leases
    -- for good. The worker's entry was pushed on by this very claim, so it outlives the
    -- marker only through renewals that ran after it, which a replay precedes by milliseconds.
    redis.call("SET", KEYS[6], cjson.encode(made), "PX", 2 * tonumber(ARGV[2]) + 10000)
    -- Each claimed session took a wake-up token when it became ready: take them out, so an idle
    -- claimer is not woken for sessions already claimed.
    local surplus = #backlogs - (tonumber(ARGV[8]) or 0)
    if surplus > 0 then
      redis.call("LPOP", KEYS[7], surplus)
    end
    return reply
  end
end

local nextAt = -1
local nextReady = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if nextReady[2] then
  nextAt = tonumber(nextReady[2])
end
local nextDeath = redis.call("ZRANGE", KEYS[2], 0, 0, "WITHSCORES")
if nextDeath[2] and (nextAt < 0 or tonumber(nextDeath[2]) < nextAt) then
  nextAt = tonumber(nextDeath[2])
end
return { "", tostring(nextAt) }
