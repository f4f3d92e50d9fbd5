--[[
  Approves a pending pairing request, once: the request leaves the pending set whatever happens,
  and becomes an approval only while its code is valid.

  KEYS[1] pairing:codes     HASH code -> request JSON
  KEYS[2] pairing:senders   HASH "<channel>:<senderId>" -> code of the sender's pending request
  KEYS[3] pairing:expiry    ZSET code -> expiresAt (ms); a code is valid while now < expiresAt
  KEYS[4] pairing:approved  HASH "<channel>:<senderId>" -> approval JSON
  ARGV[1] code (normalized)
  ARGV[2] now (ms), an integer
  Output: the approval JSON, or nil when the code is unknown or expired
]]
local code, now = ARGV[1], ARGV[2]

local stored = redis.call("HGET", KEYS[1], code)
if not stored then return nil end
local expiry = redis.call("ZSCORE", KEYS[3], code)
local request = cjson.decode(stored)
local field = request.channel .. ":" .. request.senderId

redis.call("HDEL", KEYS[1], code)
redis.call("ZREM", KEYS[3], code)
if redis.call("HGET", KEYS[2], field) == code then redis.call("HDEL", KEYS[2], field) end
if (not expiry) or tonumber(expiry) <= tonumber(now) then return nil end

-- The request JSON as the client wrote it, plus approvedAt: no re-encoding, so numbers and
-- strings stay exactly as they were (cjson would reformat them).
local approved = string.sub(stored, 1, -2) .. ',"approvedAt":' .. now .. "}"
redis.call("HSET", KEYS[4], field, approved)
return approved
