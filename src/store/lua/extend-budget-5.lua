--[[
  Keeps a reservation held longer (a model call still streaming renews it every third of its TTL).
  A member already released (expired, or settled) is not brought back.

  KEYS[i]  budget:<unit>:<scope>:held  ZSET of budget i (i = 1..5)
  ARGV[1] now (ms)
  ARGV[2] TTL (ms)
  ARGV[2 + i] the reservation's member in budget i ("<id>:<amount>"), "" for an unused slot
  Output: how many budgets still held it
]]
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local extended = 0
for slot = 1, 5 do
  local member = ARGV[2 + slot]
  if member ~= "" then
    local expiry = redis.call("ZSCORE", KEYS[slot], member)
    if expiry and tonumber(expiry) > now then
      redis.call("ZADD", KEYS[slot], "XX", now + ttl, member)
      extended = extended + 1
    end
  end
end
return extended
