--[[
  Takes or keeps a leader lease: succeeds when the key is free or already ours, and (re)sets its
  expiry. One connector per platform account holds it, so exactly one process polls Telegram or
  delivers a channel's replies.

  KEYS[1] leader:<name>
  ARGV[1] holder id
  ARGV[2] TTL (ms)
  Output: 1 we lead, 0 someone else does
]]
local current = redis.call("GET", KEYS[1])
if current and current ~= ARGV[1] then
  return 0
end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return 1
