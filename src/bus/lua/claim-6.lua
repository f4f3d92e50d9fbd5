--[[
  Claims the sessions that have been ready longest, up to ARGV[5] of them: for each, bumps the
  fencing token, leases the session and returns its backlog (oldest first, at most ARGV[4]
  messages). Expired leases are reaped first, so the sessions of dead workers become ready again.
  Each call carries a claim id: the same call replayed (its reply lost with the connection) hands
  back the claims it made, not new ones, so no lease is orphaned and no attempt counted twice.

  KEYS[1] ready      ZSET sid -> due time (ms)
  KEYS[2] lease      ZSET sid -> lease expiry (ms)
  KEYS[3] own        HASH sid -> token of the current lease
  KEYS[4] fence      counter of tokens (strictly increasing)
  KEYS[5] attempts   HASH first message id -> claims of that batch
  KEYS[6] claimed:<claim id>  the claims this call made (JSON), kept for the lease TTL
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] lease TTL (ms)
  ARGV[3] mailbox key prefix ("{p}:in:"); mailboxes share the hash tag of the other keys
  ARGV[4] most messages per claim
  ARGV[5] most sessions to claim (default 1)
  Output: { sid, token, attempt, { message JSON, ... }, sid, token, ... } (four per claim), or
          { "", next due time or -1 } when nothing is due
]]
--- @include "includes/clock"

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

local expired = redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", now, "LIMIT", 0, 100)
for _, sid in ipairs(expired) do
  redis.call("ZREM", KEYS[2], sid)
  redis.call("HDEL", KEYS[3], sid)
  if redis.call("LLEN", ARGV[3] .. sid) > 0 then
    redis.call("ZADD", KEYS[1], "NX", now, sid)
  end
end

local wanted = tonumber(ARGV[5]) or 1
local reply = {}
local made = {}
while #made < wanted do
  local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, 1)
  local sid = due[1]
  if not sid then
    break
  end
  redis.call("ZREM", KEYS[1], sid)
  local mailbox = ARGV[3] .. sid
  if redis.call("LLEN", mailbox) > 0 and not redis.call("ZSCORE", KEYS[2], sid) then
    local token = redis.call("INCR", KEYS[4])
    redis.call("HSET", KEYS[3], sid, token)
    redis.call("ZADD", KEYS[2], now + tonumber(ARGV[2]), sid)
    local messages = redis.call("LRANGE", mailbox, 0, tonumber(ARGV[4]) - 1)
    local firstId = cjson.decode(messages[1])["id"]
    local attempt = redis.call("HINCRBY", KEYS[5], firstId, 1)
    table.insert(made, { sid = sid, token = token, attempt = attempt })
    for _, value in ipairs({ sid, token, attempt, messages }) do
      table.insert(reply, value)
    end
  end
end
if #made > 0 then
  redis.call("SET", KEYS[6], cjson.encode(made), "PX", tonumber(ARGV[2]))
  return reply
end

local nextAt = -1
local nextReady = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if nextReady[2] then
  nextAt = tonumber(nextReady[2])
end
local nextLease = redis.call("ZRANGE", KEYS[2], 0, 0, "WITHSCORES")
if nextLease[2] and (nextAt < 0 or tonumber(nextLease[2]) < nextAt) then
  nextAt = tonumber(nextLease[2])
end
return { "", tostring(nextAt) }
