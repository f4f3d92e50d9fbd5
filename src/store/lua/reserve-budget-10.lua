--[[
  Reserves a model call's worst case against up to five budgets, all or nothing: granted only
  while every budget has room (used in its window plus held by calls in flight below its limit).
  Expired reservations (of crashed workers) are released first. The budgets share the hash tag
  of the deployment, so one script may touch them together.

  KEYS[2i-1] budget:<unit>:<scope>       HASH of budget i (i = 1..5), see includes/budget-state
  KEYS[2i]   budget:<unit>:<scope>:held  ZSET of budget i
             (an unused slot names any key of the tag; its ARGV limit is "" and it is not touched)
  ARGV[1] now (ms)
  ARGV[2] reservation TTL (ms)
  ARGV[3] reservation id
  ARGV[4 + 4(i-1) .. 7 + 4(i-1)] budget i: limit ("" unused), window start (ms), amount, keep (ms)
  Output: { 1 } granted; or { 0, used, held, oldest, ... } three per slot (0 for unused, oldest
          -1 when nothing was used) when a budget had no room, and nothing was reserved
]]
--- @include "includes/budget-state"

local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local id = ARGV[3]

local states = {}
local full = false
for slot = 1, budgetSlots do
  local base = 4 + 4 * (slot - 1)
  if ARGV[base] ~= "" then
    local used, held, oldest = budgetState(KEYS[2 * slot - 1], KEYS[2 * slot], now, tonumber(ARGV[base + 1]))
    states[slot] = { used, held, oldest or -1 }
    if used + held >= tonumber(ARGV[base]) then full = true end
  else
    states[slot] = { 0, 0, -1 }
  end
end

if full then
  local reply = { 0 }
  for slot = 1, budgetSlots do
    for _, value in ipairs(states[slot]) do table.insert(reply, value) end
  end
  return reply
end

for slot = 1, budgetSlots do
  local base = 4 + 4 * (slot - 1)
  if ARGV[base] ~= "" then
    local hash, held = KEYS[2 * slot - 1], KEYS[2 * slot]
    local amount = ARGV[base + 2]
    redis.call("ZADD", held, now + ttl, id .. ":" .. amount)
    redis.call("HINCRBY", hash, "held", amount)
    keepBudget(hash, held, math.max(tonumber(ARGV[base + 3]), ttl))
  end
end
return { 1 }
