--[[
  A pairing request: the sender's pending request while its code is valid, else a new one under
  the candidate code. Drops up to 100 expired requests on the way, so abandoned codes do not pile up.

  KEYS[1] pairing:codes     HASH code -> request JSON
  KEYS[2] pairing:senders   HASH "<channel>:<senderId>" -> code of the sender's pending request
  KEYS[3] pairing:expiry    ZSET code -> expiresAt (ms); a code is valid while now < expiresAt
  ARGV[1] now (ms)
  ARGV[2] sender field "<channel>:<senderId>"
  ARGV[3] candidate code
  ARGV[4] request JSON carrying the candidate code
  ARGV[5] its expiresAt (ms)
  Output: {1, json} created; {0, json} the sender's pending request; {2} the candidate code is taken
]]
local now, field, candidate, json, expiresAt = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local function forget(code)
  local stored = redis.call("HGET", KEYS[1], code)
  if stored then
    local request = cjson.decode(stored)
    local owner = request.channel .. ":" .. request.senderId
    if redis.call("HGET", KEYS[2], owner) == code then redis.call("HDEL", KEYS[2], owner) end
  end
  redis.call("HDEL", KEYS[1], code)
  redis.call("ZREM", KEYS[3], code)
end

for _, code in ipairs(redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now, "LIMIT", 0, 100)) do
  forget(code)
end

local pending = redis.call("HGET", KEYS[2], field)
if pending then
  local expiry = redis.call("ZSCORE", KEYS[3], pending)
  local stored = redis.call("HGET", KEYS[1], pending)
  if expiry and stored and tonumber(expiry) > now then return {0, stored} end
  redis.call("HDEL", KEYS[2], field)
  forget(pending)
end

if redis.call("HEXISTS", KEYS[1], candidate) == 1 then return {2} end
redis.call("HSET", KEYS[1], candidate, json)
redis.call("HSET", KEYS[2], field, candidate)
redis.call("ZADD", KEYS[3], expiresAt, candidate)
return {1, json}
